// Helpers shared by the engine/model tests: reference-data paths, whole-file reads and writes,
// hand-made safetensors bytes and shards.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/safetensors.h"
#include "tests/common/test_util.h"

namespace tandem::engine::testing {

inline std::string TestData(const std::string& rel) {
  return ::tandem::testing::TestdataDir() + "/" + rel;
}

// The message of a status as a std::string, for find() and printing.
inline std::string Msg(const absl::Status& st) { return std::string(st.message()); }

// The test's own temporary folder (removed when the test ends): the one all tests share.
using ::tandem::testing::TempDir;

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a hand-written header (for byte surgery): [len][header][data].
inline std::string MakeSafetensorsBytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// One small bf16 [2, 3] tensor per name, with values that differ between names (1..6, 11..16,
// ...): enough to write shards and checkpoints whose reads can be told apart.
inline std::vector<NamedTensorData> Shard(const std::vector<std::string>& names) {
  std::vector<NamedTensorData> out;
  float v = 1;
  for (const auto& n : names) out.push_back({n, DType::kBF16, {2, 3}, {v, v + 1, v + 2, v + 3, v + 4, v + 5}, {}, {}}), v += 10;
  return out;
}

}  // namespace tandem::engine::testing
