// The cpu backend on the block-scaled FP8 checkpoints against their golden, computed by
// transformers from the dequantized weights in float32: logits at every position of every prompt
// within 1e-4 relative and the identical greedy continuations, at TP 1, 2 and 4 (ranks as threads
// of this process).
// - qwen3moe-fp8-tiny: attention and expert weights stored F8_E4M3 with 32 x 32 blocks of float32
//   scales. At TP 4 each rank's 16 rows (gate/up) or columns (down) of an expert's 64
//   intermediate ones cut a 32-block in half: both halves must keep that block's scale.
// - qwen35moe-fp8-tiny: the hybrid stack, where the Gated DeltaNet's in_proj_qkv / in_proj_z /
//   out_proj and the shared expert are FP8 too but in_proj_a / in_proj_b stay bf16 beside them.
//   At TP 4 in_proj_qkv's 512 rows are split per section (q and k 128 each, v 256): a rank's
//   32 q rows are one scale block, its 64 v rows two, each taken from its own block row; the
//   shared expert's 64 intermediate rows split into 16 per rank and cut its blocks in half.
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "tests/engine/cpu/golden.h"
#include "tests/engine/cpu/golden_check.h"

namespace tandem::engine {
namespace {

class cpu_model_fp8_golden : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(cpu_model_fp8_golden, LogitsAndGreedyMatchTransformers) {
  const auto& [name, tp] = GetParam();
  ModelLoadOptions opt;
  opt.threads = 1;
  absl::Status st = testing::CheckTestdataModelGolden(name, tp, opt, nullptr, 1e-4);
  ASSERT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Models, cpu_model_fp8_golden,
                         ::testing::Combine(::testing::Values("qwen3moe-fp8-tiny", "qwen35moe-fp8-tiny"),
                                            ::testing::Values(1, 2, 4)),
                         [](const auto& p) { return testing::FixtureTpName(std::get<0>(p.param), std::get<1>(p.param)); });

}  // namespace
}  // namespace tandem::engine
