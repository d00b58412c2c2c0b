#include "engine/batching/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::engine {

double LogSumExp(const float* logits, int64_t vocab) {
  if (vocab <= 0) return -std::numeric_limits<double>::infinity();
  const double mx = *std::max_element(logits, logits + vocab);
  if (!std::isfinite(mx)) return mx;  // every logit -inf (or a +inf): nothing to normalise
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return mx + std::log(sum);
}

TokenLogprob TokenLogprobOf(const float* logits, int64_t vocab, double log_sum_exp, int32_t token, int32_t num_top) {
  TokenLogprob out;
  out.token = token;
  out.logprob = static_cast<float>(static_cast<double>(logits[token]) - log_sum_exp);
  const int64_t k = std::min<int64_t>(std::max(num_top, 0), vocab);
  if (k == 0) return out;
  // The k best in one pass over the row: a small sorted list, since k <= 20 and the vocabulary
  // is ~150k (a full sort per token would cost more than the forward step at batch 1).
  auto better = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  std::vector<int32_t> best;
  best.reserve(k + 1);
  // Once k are held, a later id must beat the worst held strictly (it loses a tie: its id is
  // higher): one float compare for almost every token.
  float worst = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) {
    if (static_cast<int64_t>(best.size()) == k && !(logits[i] > worst)) continue;
    const int32_t id = static_cast<int32_t>(i);
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (static_cast<int64_t>(best.size()) > k) best.pop_back();
    worst = logits[best.back()];
  }
  out.top.reserve(k);
  for (int32_t id : best) out.top.emplace_back(id, static_cast<float>(static_cast<double>(logits[id]) - log_sum_exp));
  return out;
}

}  // namespace tandem::engine
