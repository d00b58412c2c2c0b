// The qwen3moe-tiny golden reference (transformers 5.17, float32, eager attention) and the
// comparisons the cpu tests make against it.
#pragma once

#include <cstdint>
#include <cstdlib>
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

// prompt0..2 of <dir>/golden.safetensors.
absl::StatusOr<std::vector<GoldenPrompt>> LoadGolden(const std::string& model_dir);

// max |got - want| / max |want| over all values.
double RelativeError(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace tandem::engine::testing
