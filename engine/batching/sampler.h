// Picking the next token from one row of logits: greedy, temperature, min-p, top-k, top-p (nucleus).
// Pure functions of (logits, settings, rng): a sequence owns its rng (seeded from its request's
// seed), so its sampled tokens do not depend on what else is in the batch.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace tandem::engine {

struct SamplerSettings {
  float temperature = 1.0f;  // <= 0: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off

  bool greedy() const { return temperature <= 0.0f || top_k == 1; }
};

// The highest logit; the lowest id among equal maxima (a tie never depends on threads or order).
int32_t GreedyToken(const float* logits, int64_t vocab);

// The distribution a draw is made from: softmax(logits / temperature) restricted to the tokens
// whose probability is at least min_p times the largest and to the top_k most likely tokens
// (both keep a most-likely prefix, so their order does not matter), then to the smallest prefix (by descending probability) whose mass reaches
// top_p, renormalised. (token, probability) pairs, most likely first, ties by lower id. Greedy
// settings give the single argmax token with probability 1.
std::vector<std::pair<int32_t, double>> SamplingDistribution(const float* logits, int64_t vocab,
                                                             const SamplerSettings& settings);

// One token: GreedyToken for greedy settings (rng untouched), else one draw from
// SamplingDistribution using exactly one value of `rng`.
int32_t SampleNextToken(const float* logits, int64_t vocab, const SamplerSettings& settings,
                        std::mt19937_64& rng);

}  // namespace tandem::engine
