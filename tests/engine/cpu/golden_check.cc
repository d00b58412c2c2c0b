#include "tests/engine/cpu/golden_check.h"

#include <cstdio>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/comm/rank_threads.h"
#include "engine/generate.h"

namespace tandem::engine::testing {

absl::Status RunOnRanks(int tp, ModelLoadOptions opt, const std::function<absl::Status()>& on_rank,
                        const std::function<absl::Status(StepDriver&)>& check) {
  return RunRanksAsThreads(tp, [&](Comm& comm) -> absl::Status {
    if (on_rank) RETURN_IF_ERROR(on_rank());
    ModelLoadOptions o = opt;
    o.rank = comm.rank();
    o.world = comm.world_size();
    o.comm = &comm;
    ASSIGN_OR_RETURN(auto model, Model::Load(TinyModelDir(), o));
    if (comm.rank() != 0) return RunWorkerLoop(*model, comm);
    StepDriver driver(model.get(), &comm);
    absl::Status st = check(driver);
    absl::Status stop = driver.Stop();
    return st.ok() ? stop : st;
  });
}

absl::Status CheckGoldenPrompts(StepDriver& driver, const std::vector<GoldenPrompt>& golden, const std::string& tag,
                                double bound) {
  for (size_t i = 0; i < golden.size(); ++i) {
    const GoldenPrompt& g = golden[i];
    ASSIGN_OR_RETURN(Logits logits, PromptLogits(driver, g.ids));
    EXPECT_EQ(logits.rows(), static_cast<int64_t>(g.ids.size()));
    EXPECT_EQ(logits.vocab, static_cast<int64_t>(g.logits.size() / g.ids.size()));
    const double rel = RelativeError(logits.data, g.logits);
    std::printf("%s prompt%zu (%zu tokens): max abs diff / max abs logit = %.3g (bound %.0e); logits[0][0..2] = "
                "%.5f %.5f %.5f vs golden %.5f %.5f %.5f\n",
                tag.c_str(), i, g.ids.size(), rel, bound, logits.data[0], logits.data[1], logits.data[2],
                g.logits[0], g.logits[1], g.logits[2]);
    EXPECT_LT(rel, bound) << tag << " prompt" << i;

    GenerateOptions gen;
    gen.max_tokens = static_cast<int>(g.greedy.size());
    ASSIGN_OR_RETURN(GenerateResult r, Generate(driver, g.ids, gen));
    EXPECT_EQ(r.token_ids, g.greedy) << tag << " prompt" << i;
    std::printf("%s prompt%zu greedy: %zu tokens, %s\n", tag.c_str(), i, r.token_ids.size(),
                r.token_ids == g.greedy ? "identical to golden" : "DIFFERENT from golden");
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine::testing
