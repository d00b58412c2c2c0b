// The cpu backend (engine/cpu/cpu_model.cc) against the transformers golden for qwen3moe-tiny: logits at every position of
// the three prompts within 1e-4 relative, and the identical 16-token greedy continuations, at
// TP = 1, 2 and 4 with the ranks as threads of this process (Gloo over loopback).
#include <cstdio>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/comm/rank_threads.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/cpu/golden_check.h"

namespace tandem::engine {
namespace {

class cpu_model_golden : public ::testing::TestWithParam<int> {};

TEST_P(cpu_model_golden, LogitsAndGreedyMatchTransformers) {
  const int tp = GetParam();
  auto golden = testing::LoadGolden(testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  ModelLoadOptions opt;
  opt.threads = 1;
  absl::Status st = testing::RunOnRanks(tp, opt, nullptr, [&](StepDriver& driver) {
    return testing::CheckGoldenPrompts(driver, *golden, "tp=" + std::to_string(tp), 1e-4);
  });
  ASSERT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Tp, cpu_model_golden, ::testing::Values(1, 2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& p) { return "tp" + std::to_string(p.param); });

}  // namespace
}  // namespace tandem::engine
