// The cpu backend on a block-scaled FP8 checkpoint (qwen3moe-fp8-tiny: attention and expert
// weights stored F8_E4M3 with 32 x 32 blocks of float32 scales) against its golden, computed by
// transformers from the dequantized weights in float32: logits at every position of every prompt
// within 1e-4 relative and the identical greedy continuations, at TP 1, 2 and 4 (ranks as threads
// of this process). At TP 4 each rank's 16 rows (gate/up) or columns (down) of an expert's 64
// intermediate ones cut a 32-block in half: both halves must keep that block's scale.
#include <string>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "tests/engine/cpu/golden_check.h"

namespace tandem::engine {
namespace {

class cpu_model_fp8_golden : public ::testing::TestWithParam<int> {};

TEST_P(cpu_model_fp8_golden, LogitsAndGreedyMatchTransformers) {
  ModelLoadOptions opt;
  opt.threads = 1;
  absl::Status st = testing::CheckTestdataModelGolden("qwen3moe-fp8-tiny", GetParam(), opt, nullptr, 1e-4);
  ASSERT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Tp, cpu_model_fp8_golden, ::testing::Values(1, 2, 4),
                         [](const auto& p) { return "tp" + std::to_string(p.param); });

}  // namespace
}  // namespace tandem::engine
