#include "tests/engine/cpu/kv_dtype_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "engine/generate.h"

namespace tandem::engine::testing {

namespace {

// The last row of the prompt's logits.
absl::StatusOr<std::vector<float>> LastRow(StepDriver& driver, const std::vector<int32_t>& ids) {
  auto l = PromptLogits(driver, ids);
  if (!l.ok()) return l.status();
  return std::vector<float>(l->row(l->rows() - 1), l->row(l->rows() - 1) + l->vocab);
}

}  // namespace

void ExpectNearTie(StepDriver& ref, StepDriver& test, std::vector<int32_t> ids, const std::vector<int32_t>& want,
                   const std::vector<int32_t>& got, const std::string& tag) {
  size_t k = 0;
  while (k < want.size() && k < got.size() && want[k] == got[k]) ++k;
  ASSERT_LT(k, std::min(want.size(), got.size())) << tag;
  ids.insert(ids.end(), want.begin(), want.begin() + static_cast<std::ptrdiff_t>(k));
  auto r = LastRow(ref, ids);
  auto t = LastRow(test, ids);
  ASSERT_TRUE(r.ok() && t.ok()) << tag;
  double spread = 0;
  for (size_t i = 0; i < r->size(); ++i) spread = std::max(spread, std::abs(static_cast<double>((*t)[i]) - (*r)[i]));
  const double ref_gap = (*r)[want[k]] - (*r)[got[k]], test_gap = (*t)[got[k]] - (*t)[want[k]];
  std::printf("%s greedy parts at step %zu: token %d (reference) vs %d; logit gaps %.4g (reference), %.4g (this "
              "run), max logit diff %.4g\n",
              tag.c_str(), k, want[k], got[k], ref_gap, test_gap, spread);
  EXPECT_LT(ref_gap, spread) << tag << ": greedy parts at step " << k << " without a near tie";
  EXPECT_LT(test_gap, spread) << tag << ": greedy parts at step " << k << " without a near tie";
}

double CompareKvDtypeRuns(StepDriver& ref, StepDriver& test, const std::vector<GoldenPrompt>& prompts,
                          const std::string& tag, const std::string& ref_name, double bound) {
  double worst = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& ids = prompts[i].ids;
    auto a = PromptLogits(ref, ids);
    auto b = PromptLogits(test, ids);
    EXPECT_TRUE(a.ok() && b.ok()) << tag;
    if (!a.ok() || !b.ok()) return worst;
    const double rel = RelativeError(b->data, a->data);
    worst = std::max(worst, rel);
    std::printf("%s prompt%zu (%zu tokens): max abs diff / max abs logit vs %s = %.3g (bound %.0e)\n", tag.c_str(),
                i, ids.size(), ref_name.c_str(), rel, bound);
    EXPECT_LT(rel, bound) << tag << " prompt" << i;
    EXPECT_GT(rel, 0.0) << tag << ": the cache's element type made no difference at all";

    GenerateOptions gen;
    gen.max_tokens = 16;
    auto ga = Generate(ref, ids, gen);
    auto gb = Generate(test, ids, gen);
    EXPECT_TRUE(ga.ok() && gb.ok()) << tag;
    if (!ga.ok() || !gb.ok()) return worst;
    const bool same = ga->token_ids == gb->token_ids;
    std::printf("%s prompt%zu greedy: %s %s\n", tag.c_str(), i, same ? "identical to" : "DIFFERENT from",
                ref_name.c_str());
    if (!same) ExpectNearTie(ref, test, ids, ga->token_ids, gb->token_ids, tag);
  }
  std::printf("%s: worst relative logit difference vs %s %.3g (bound %.0e)\n", tag.c_str(), ref_name.c_str(), worst,
              bound);
  return worst;
}

}  // namespace tandem::engine::testing
