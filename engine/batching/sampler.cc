#include "engine/batching/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem::engine {

namespace {

// "a before b" in the order the truncations walk: larger logit first, then lower id.
struct MoreLikely {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  }
};

}  // namespace

int32_t GreedyToken(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;  // strict: the first (lowest) id wins a tie
  }
  return static_cast<int32_t>(best);
}

std::vector<std::pair<int32_t, double>> SamplingDistribution(const float* logits, int64_t vocab,
                                                             const SamplerSettings& s) {
  std::vector<std::pair<int32_t, double>> dist;
  if (vocab <= 0) return dist;
  if (s.greedy()) {
    dist.emplace_back(GreedyToken(logits, vocab), 1.0);
    return dist;
  }
  // Candidates in descending order. Only the top_k need sorting when top_k is set; without any
  // truncation id order is as good as any (and saves a sort of the whole vocabulary).
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  const float mx = *std::max_element(logits, logits + vocab);
  const double inv_t = 1.0 / static_cast<double>(s.temperature);
  // Unnormalised: the argmax weighs 1, so weight(id) is also p(id) / p_max, the ratio min_p cuts on.
  auto weight = [&](int32_t id) { return std::exp((static_cast<double>(logits[id]) - mx) * inv_t); };
  if (s.min_p > 0.0f) {
    ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int32_t id) { return weight(id) < s.min_p; }),
              ids.end());
  }
  const int64_t n = static_cast<int64_t>(ids.size());  // at least the argmax
  const bool use_top_k = s.top_k > 0 && s.top_k < n;
  const bool use_top_p = s.top_p < 1.0f;
  double total = 0;  // the softmax denominator over what survives min_p and top-k
  if (use_top_k) {
    std::partial_sort(ids.begin(), ids.begin() + s.top_k, ids.end(), MoreLikely{logits});
    ids.resize(s.top_k);
    for (int32_t id : ids) total += weight(id);
  } else {
    for (int32_t id : ids) total += weight(id);
    if (use_top_p) {
      // The nucleus is usually a few hundred tokens of a 150k vocabulary: sort a head first and
      // the whole vocabulary only when the head's mass falls short of top_p (same result: the
      // order is total, so a sorted head is the head of the full sort).
      const int64_t head = std::min<int64_t>(n, 1024);
      std::partial_sort(ids.begin(), ids.begin() + head, ids.end(), MoreLikely{logits});
      double head_mass = 0;
      // Summed exactly as the nucleus loop below sums, so both agree on where the cut falls.
      for (int64_t i = 0; i < head; ++i) head_mass += weight(ids[i]) / total;
      if (head_mass >= std::max(0.0f, s.top_p)) {
        ids.resize(head);
      } else {
        std::sort(ids.begin() + head, ids.end(), MoreLikely{logits});
      }
    }
  }

  // softmax(logits / T) over the candidates, in double (max subtracted for range).
  dist.reserve(ids.size());
  for (int32_t id : ids) dist.emplace_back(id, weight(id) / total);

  // Nucleus: the smallest prefix whose mass reaches top_p (at least one token).
  if (use_top_p) {
    const double target = std::max(0.0f, s.top_p);
    double mass = 0;
    size_t n = 0;
    while (n < dist.size()) {
      mass += dist[n].second;
      ++n;
      if (mass >= target) break;
    }
    dist.resize(n);
    for (auto& d : dist) d.second /= mass;
  }
  return dist;
}

int32_t SampleNextToken(const float* logits, int64_t vocab, const SamplerSettings& settings,
                        std::mt19937_64& rng) {
  if (settings.greedy()) return GreedyToken(logits, vocab);
  const auto dist = SamplingDistribution(logits, vocab, settings);
  // One 53-bit uniform in [0, 1) from one rng value, so every token costs the same rng state.
  const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
  double acc = 0;
  for (const auto& [id, p] : dist) {
    acc += p;
    if (u < acc) return id;
  }
  // Rounding left u just above the total: the last token that can be drawn (a masked token,
  // probability 0, must never come out).
  for (auto it = dist.rbegin(); it != dist.rend(); ++it) {
    if (it->second > 0) return it->first;
  }
  return dist.front().first;
}

}  // namespace tandem::engine
