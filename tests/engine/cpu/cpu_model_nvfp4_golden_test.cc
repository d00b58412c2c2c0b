// The cpu backend on an NVFP4 checkpoint (qwen3moe-nvfp4-tiny, NVIDIA ModelOpt's export: attention
// and expert weights stored as packed e2m1 codes with F8_E4M3 scales per 16 inputs and a float32
// scale per weight) against its golden, computed by transformers from the dequantized weights in
// float32: logits at every position of every prompt within 1e-4 relative and the identical greedy
// continuations, at TP 1, 2 and 4 (ranks as threads of this process). At TP 4 an expert's 64
// intermediate columns of down_proj split into 16 per rank, one scale group each, and o_proj's
// inputs by heads: every split falls on a group boundary as it must.
#include <string>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "tests/engine/cpu/golden_check.h"

namespace tandem::engine {
namespace {

class cpu_model_nvfp4_golden : public ::testing::TestWithParam<int> {};

TEST_P(cpu_model_nvfp4_golden, LogitsAndGreedyMatchTransformers) {
  ModelLoadOptions opt;
  opt.threads = 1;
  absl::Status st = testing::CheckTestdataModelGolden("qwen3moe-nvfp4-tiny", GetParam(), opt, nullptr, 1e-4);
  ASSERT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Tp, cpu_model_nvfp4_golden, ::testing::Values(1, 2, 4),
                         [](const auto& p) { return "tp" + std::to_string(p.param); });

}  // namespace
}  // namespace tandem::engine
