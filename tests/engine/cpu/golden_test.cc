// The cpu backend against the transformers golden for qwen3moe-tiny: logits at every position of
// the three prompts within 1e-4 relative, and the identical 16-token greedy continuations, at
// TP = 1, 2 and 4 with the ranks as threads of this process (Gloo over loopback).
#include <cstdio>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/comm/rank_threads.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine {
namespace {

using testing::GoldenPrompt;

// Loads the model on every rank; rank 0 runs `check(driver)`, the others serve steps.
absl::Status RunOnRanks(int tp, const std::function<absl::Status(StepDriver&)>& check) {
  return RunRanksAsThreads(tp, [&](Comm& comm) -> absl::Status {
    ModelLoadOptions opt;
    opt.rank = comm.rank();
    opt.world = comm.world_size();
    opt.comm = &comm;
    opt.threads = 1;
    ASSIGN_OR_RETURN(auto model, Model::Load(testing::TinyModelDir(), opt));
    if (comm.rank() != 0) return RunWorkerLoop(*model, comm);
    StepDriver driver(model.get(), &comm);
    absl::Status st = check(driver);
    absl::Status stop = driver.Stop();
    return st.ok() ? stop : st;
  });
}

class GoldenTest : public ::testing::TestWithParam<int> {};

TEST_P(GoldenTest, LogitsAndGreedyMatchTransformers) {
  const int tp = GetParam();
  auto golden = testing::LoadGolden(testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  absl::Status st = RunOnRanks(tp, [&](StepDriver& driver) -> absl::Status {
    for (size_t i = 0; i < golden->size(); ++i) {
      const GoldenPrompt& g = (*golden)[i];
      ASSIGN_OR_RETURN(Logits logits, PromptLogits(driver, g.ids));
      EXPECT_EQ(logits.rows(), static_cast<int64_t>(g.ids.size()));
      const double rel = testing::RelativeError(logits.data, g.logits);
      std::printf("tp=%d prompt%zu (%zu tokens): max abs diff / max abs logit = %.3g; logits[0][0..3] = "
                  "%.5f %.5f %.5f vs golden %.5f %.5f %.5f\n",
                  tp, i, g.ids.size(), rel, logits.data[0], logits.data[1], logits.data[2], g.logits[0],
                  g.logits[1], g.logits[2]);
      EXPECT_LT(rel, 1e-4) << "prompt" << i;

      GenerateOptions gen;
      gen.max_tokens = static_cast<int>(g.greedy.size());
      ASSIGN_OR_RETURN(GenerateResult r, Generate(driver, g.ids, gen));
      EXPECT_EQ(r.token_ids, g.greedy) << "prompt" << i;
      std::printf("tp=%d prompt%zu greedy: %zu tokens, %s\n", tp, i, r.token_ids.size(),
                  r.token_ids == g.greedy ? "identical to golden" : "DIFFERENT from golden");
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Tp, GoldenTest, ::testing::Values(1, 2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& p) { return "tp" + std::to_string(p.param); });

}  // namespace
}  // namespace tandem::engine
