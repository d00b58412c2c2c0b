// The tiny models' golden references (qwen3moe-tiny; the hybrid qwen35moe-tiny and qwen3next-tiny) (transformers 5.17, float32, eager attention) and the
// comparisons the cpu tests make against it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/common/test_util.h"

namespace tandem::engine::testing {

struct GoldenPrompt {
  std::vector<int32_t> ids;     // (n)
  std::vector<float> logits;    // (n, vocab)
  std::vector<int32_t> greedy;  // (16) the greedy continuation
};

inline std::string TestdataDir() { return ::tandem::testing::TestdataDir(); }
inline std::string TinyModelDir() { return TestdataDir() + "/qwen3moe-tiny"; }
inline std::string Qwen35MoeTinyDir() { return TestdataDir() + "/qwen35moe-tiny"; }
inline std::string Qwen3NextTinyDir() { return TestdataDir() + "/qwen3next-tiny"; }

// prompt0..2 of <dir>/golden.safetensors, and prompt3.. where present.
absl::StatusOr<std::vector<GoldenPrompt>> LoadGolden(const std::string& model_dir);

// max |got - want| / max |want| over all values.
double RelativeError(std::span<const float> got, std::span<const float> want);

// A gtest parameter name for a fixture folder at a TP size: "qwen35moe-fp8-tiny", 2 ->
// "qwen35moe_fp8_tiny_tp2" (gtest names take no '-').
inline std::string FixtureTpName(const std::string& fixture, int tp) {
  std::string n = fixture + "_tp" + std::to_string(tp);
  for (char& c : n) c = (c == '-') ? '_' : c;
  return n;
}

}  // namespace tandem::engine::testing
