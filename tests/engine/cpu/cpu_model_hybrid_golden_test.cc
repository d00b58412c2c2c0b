// The cpu backend (engine/cpu/cpu_model.cc with engine/cpu/gated_deltanet.cc) against the
// transformers golden of the hybrid models: qwen35moe-tiny (Qwen3.5-MoE, split DeltaNet
// projections) and qwen3next-tiny (Qwen3-Next, fused in_proj_qkvz / in_proj_ba). Logits at every
// position of every prompt within 1e-4 relative and the identical 16-token greedy continuations;
// ranks as threads of this process (Gloo over loopback).
#include <cstdio>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/cpu/golden.h"
#include "tests/engine/cpu/golden_check.h"

namespace tandem::engine {
namespace {

class cpu_model_hybrid_golden : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(cpu_model_hybrid_golden, LogitsAndGreedyMatchTransformers) {
  const auto& [name, tp] = GetParam();
  const std::string dir = testing::TestdataDir() + "/" + name;
  auto golden = testing::LoadGolden(dir);
  ASSERT_TRUE(golden.ok()) << golden.status();
  ModelLoadOptions opt;
  opt.threads = 1;
  absl::Status st = testing::RunOnRanks(
      tp, opt, nullptr,
      [&](StepDriver& driver) {
        return testing::CheckGoldenPrompts(driver, *golden, name + " tp=" + std::to_string(tp), 1e-4);
      },
      dir);
  ASSERT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Models, cpu_model_hybrid_golden,
                         ::testing::Combine(::testing::Values("qwen35moe-tiny", "qwen3next-tiny"),
                                            ::testing::Values(1, 2, 4)),
                         [](const auto& p) { return testing::FixtureTpName(std::get<0>(p.param), std::get<1>(p.param)); });

}  // namespace
}  // namespace tandem::engine
