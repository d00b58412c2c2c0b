#include "tests/engine/cpu/golden_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/comm/rank_threads.h"
#include "engine/generate.h"

namespace tandem::engine::testing {

absl::Status RunOnRanks(int tp, ModelLoadOptions opt, const std::function<absl::Status()>& on_rank,
                        const std::function<absl::Status(StepDriver&)>& check, const std::string& model_dir) {
  return RunRanksAsThreads(tp, [&](Comm& comm) -> absl::Status {
    if (on_rank) RETURN_IF_ERROR(on_rank());
    ModelLoadOptions o = opt;
    o.rank = comm.rank();
    o.world = comm.world_size();
    o.comm = &comm;
    ASSIGN_OR_RETURN(auto model, Model::Load(model_dir, o));
    if (comm.rank() != 0) return RunWorkerLoop(*model, comm);
    StepDriver driver(model.get(), &comm);
    absl::Status st = check(driver);
    absl::Status stop = driver.Stop();
    return st.ok() ? stop : st;
  });
}

absl::Status CheckTestdataModelGolden(const std::string& name, int tp, const ModelLoadOptions& opt,
                                      const std::function<absl::Status()>& on_rank, double bound) {
  const std::string dir = TestdataDir() + "/" + name;
  ASSIGN_OR_RETURN(std::vector<GoldenPrompt> golden, LoadGolden(dir));
  const std::string tag = name + " tp=" + std::to_string(tp);
  return RunOnRanks(
      tp, opt, on_rank, [&](StepDriver& driver) { return CheckGoldenPrompts(driver, golden, tag, bound); }, dir);
}

namespace {

// Prompt i's logits at every position against the golden, printed and held to `bound`; returns
// them with the largest |logit - golden| (the path's error in logit units).
struct PromptCheck {
  Logits logits;
  double spread = 0;
};
absl::StatusOr<PromptCheck> CheckPromptLogits(StepDriver& driver, const GoldenPrompt& g, const std::string& tag,
                                              size_t i, double bound) {
  PromptCheck c;
  ASSIGN_OR_RETURN(c.logits, PromptLogits(driver, g.ids));
  const double rel = RelativeError(c.logits.data, g.logits);
  for (size_t j = 0; j < g.logits.size() && j < c.logits.data.size(); ++j) {
    c.spread = std::max(c.spread, std::abs(static_cast<double>(c.logits.data[j]) - g.logits[j]));
  }
  std::printf("%s prompt%zu (%zu tokens): max abs diff / max abs logit = %.3g (bound %.0e), max abs diff %.4g; "
              "logits[0][0..2] = %.5f %.5f %.5f vs golden %.5f %.5f %.5f\n",
              tag.c_str(), i, g.ids.size(), rel, bound, c.spread, c.logits.data[0], c.logits.data[1],
              c.logits.data[2], g.logits[0], g.logits[1], g.logits[2]);
  EXPECT_LT(rel, bound) << tag << " prompt" << i;
  return c;
}

}  // namespace

absl::Status CheckGoldenPrompts(StepDriver& driver, const std::vector<GoldenPrompt>& golden, const std::string& tag,
                                double bound) {
  for (size_t i = 0; i < golden.size(); ++i) {
    const GoldenPrompt& g = golden[i];
    ASSIGN_OR_RETURN(PromptCheck c, CheckPromptLogits(driver, g, tag, i, bound));
    EXPECT_EQ(c.logits.rows(), static_cast<int64_t>(g.ids.size()));
    EXPECT_EQ(c.logits.vocab, static_cast<int64_t>(g.logits.size() / g.ids.size()));

    GenerateOptions gen;
    gen.max_tokens = static_cast<int>(g.greedy.size());
    ASSIGN_OR_RETURN(GenerateResult r, Generate(driver, g.ids, gen));
    EXPECT_EQ(r.token_ids, g.greedy) << tag << " prompt" << i;
    std::printf("%s prompt%zu greedy: %zu tokens, %s\n", tag.c_str(), i, r.token_ids.size(),
                r.token_ids == g.greedy ? "identical to golden" : "DIFFERENT from golden");
  }
  return absl::OkStatus();
}

absl::Status CheckGoldenPromptsRounded(StepDriver& driver, const std::vector<GoldenPrompt>& golden,
                                       const std::string& tag, double bound) {
  for (size_t i = 0; i < golden.size(); ++i) {
    const GoldenPrompt& g = golden[i];
    ASSIGN_OR_RETURN(PromptCheck c, CheckPromptLogits(driver, g, tag, i, bound));

    GenerateOptions gen;
    gen.max_tokens = static_cast<int>(g.greedy.size());
    ASSIGN_OR_RETURN(GenerateResult r, Generate(driver, g.ids, gen));
    size_t k = 0;
    while (k < r.token_ids.size() && k < g.greedy.size() && r.token_ids[k] == g.greedy[k]) ++k;
    if (k == g.greedy.size() && r.token_ids.size() == g.greedy.size()) {
      std::printf("%s prompt%zu greedy: %zu tokens, identical to golden\n", tag.c_str(), i, k);
      continue;
    }
    EXPECT_LT(k, r.token_ids.size()) << tag << " prompt" << i << ": fewer tokens than the golden";
    if (k >= r.token_ids.size()) continue;
    // This run's logits where it parts from the golden (the same tokens up to there).
    std::vector<int32_t> ids = g.ids;
    ids.insert(ids.end(), g.greedy.begin(), g.greedy.begin() + static_cast<std::ptrdiff_t>(k));
    ASSIGN_OR_RETURN(Logits at, PromptLogits(driver, ids));
    const float* row = at.row(at.rows() - 1);
    const double gap = static_cast<double>(row[r.token_ids[k]]) - row[g.greedy[k]];
    std::printf("%s prompt%zu greedy parts from the golden at step %zu: token %d vs golden %d, this run's logit gap "
                "%.4g against the path's max abs diff %.4g on the prompt\n",
                tag.c_str(), i, k, r.token_ids[k], g.greedy[k], gap, c.spread);
    EXPECT_LT(gap, c.spread) << tag << " prompt" << i << ": greedy parts at step " << k << " without a near tie";
  }
  return absl::OkStatus();
}

absl::StatusOr<BatchedAndAlone> DecodeBatchedAndAlone(Model& m, const std::vector<GoldenPrompt>& golden,
                                                      int sequences) {
  if (golden.empty() || sequences < 1) return absl::InvalidArgumentError("batched decode: no prompts");
  constexpr int kBlocksPerSeq = 4;  // 64 positions: the longest golden prompt and its token
  RETURN_IF_ERROR(m.AllocateKvCache(std::max(64, kBlocksPerSeq * sequences), 16, /*num_state_slots=*/sequences));
  BatchedAndAlone r;
  r.alone.resize(sequences);
  StepBatch all;
  for (int s = 0; s < sequences; ++s) {
    const auto& ids = golden[s % golden.size()].ids;
    SeqChunk c;
    c.seq_id = s;
    c.state_slot = s;
    c.tokens = ids;
    for (int b = 0; b < kBlocksPerSeq; ++b) c.block_table.push_back(s * kBlocksPerSeq + b);
    StepBatch pre;
    pre.seqs.push_back(c);
    RETURN_IF_ERROR(m.Forward(pre).status());
    SeqChunk d = c;
    d.tokens = {42 + s};
    d.start_pos = static_cast<int32_t>(ids.size());
    d.want_logits = true;
    StepBatch one;
    one.seqs.push_back(d);
    ASSIGN_OR_RETURN(Logits l, m.Forward(one));
    r.alone[s].assign(l.data.begin(), l.data.end());
    all.seqs.push_back(d);
  }
  ASSIGN_OR_RETURN(r.batched, m.Forward(all));
  return r;
}

void ExpectBatchedRowsMatchAlone(const BatchedAndAlone& r, const std::string& tag, double bound) {
  const int n = static_cast<int>(r.alone.size());
  ASSERT_EQ(r.batched.rows(), n) << tag;
  for (int s = 0; s < n; ++s) {
    std::vector<float> row(r.batched.row(s), r.batched.row(s) + r.batched.vocab);
    const double rel = RelativeError(row, r.alone[s]);
    std::printf("%s row %d vs alone: max abs diff / max abs logit = %.3g\n", tag.c_str(), s, rel);
    EXPECT_LT(rel, bound) << tag << " row " << s;
  }
}

}  // namespace tandem::engine::testing
