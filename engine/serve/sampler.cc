#include "engine/serve/sampler.h"

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
  const bool use_top_k = s.top_k > 0 && s.top_k < vocab;
  const bool use_top_p = s.top_p < 1.0f;
  int64_t keep = vocab;
  if (use_top_k) {
    keep = s.top_k;
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), MoreLikely{logits});
    ids.resize(keep);
  } else if (use_top_p) {
    std::sort(ids.begin(), ids.end(), MoreLikely{logits});
  }

  // softmax(logits / T) over the kept candidates, in double (max subtracted for range).
  float mx = logits[ids[0]];
  for (int32_t id : ids) mx = std::max(mx, logits[id]);
  const double inv_t = 1.0 / static_cast<double>(s.temperature);
  dist.reserve(keep);
  double sum = 0;
  for (int32_t id : ids) {
    const double p = std::exp((static_cast<double>(logits[id]) - mx) * inv_t);
    dist.emplace_back(id, p);
    sum += p;
  }
  for (auto& d : dist) d.second /= sum;

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
  return dist.back().first;  // rounding left u just above the total
}

}  // namespace tandem::engine
