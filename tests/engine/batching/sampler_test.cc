// The sampler against hand-computed distributions: greedy ties, temperature, min-p, top-k, top-p, and
// 20000 seeded draws compared with the expected frequencies (chi-square bound).
#include "engine/batching/sampler.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

// log of (0.5, 0.25, 0.125, 0.125): softmax at T = 1 gives exactly these probabilities.
std::vector<float> FourTokens() {
  return {std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.125f)};
}

void ExpectDistribution(const std::vector<std::pair<int32_t, double>>& got,
                        const std::vector<std::pair<int32_t, double>>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << what << " entry " << i;
    EXPECT_NEAR(got[i].second, want[i].second, 1e-6) << what << " entry " << i;
  }
  std::printf("%s:", what);
  for (const auto& [id, p] : got) std::printf(" %d:%.4f", id, p);
  std::printf("\n");
}

// Chi-square statistic of `draws` samples against `dist`.
double ChiSquare(const std::vector<float>& logits, const SamplerSettings& s, uint64_t seed, int draws,
                 const std::vector<std::pair<int32_t, double>>& dist) {
  std::mt19937_64 rng(seed);
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[SampleNextToken(logits.data(), logits.size(), s, rng)];
  double chi2 = 0;
  int in_support = 0;
  for (const auto& [id, p] : dist) {
    const double expected = p * draws;
    const double observed = counts[id];
    in_support += counts[id];
    chi2 += (observed - expected) * (observed - expected) / expected;
    std::printf("  token %d: observed %.4f expected %.4f\n", id, observed / draws, p);
  }
  EXPECT_EQ(in_support, draws) << "a draw fell outside the truncated distribution";
  return chi2;
}

TEST(SamplerTest, GreedyTakesLowestIdOnTie) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(GreedyToken(logits.data(), logits.size()), 1);
  std::mt19937_64 rng(1);
  const uint64_t before = std::mt19937_64(1)();
  EXPECT_EQ(SampleNextToken(logits.data(), logits.size(), SamplerSettings{0.0f, 0, 1.0f}, rng), 1);
  EXPECT_EQ(rng(), before) << "greedy must not consume randomness";
}

TEST(SamplerTest, DistributionsMatchHandComputed) {
  const auto l = FourTokens();
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 1.0f}), {{0, 0.5}, {1, 0.25}, {2, 0.125}, {3, 0.125}},
                     "T=1");
  // T = 2: p ~ sqrt(p1) = (0.7071, 0.5, 0.3536, 0.3536) / 1.9142 (id order when untruncated).
  const double z = std::sqrt(0.5) + 0.5 + 2 * std::sqrt(0.125);
  ExpectDistribution(SamplingDistribution(l.data(), 4, {2.0f, 0, 1.0f}),
                     {{0, std::sqrt(0.5) / z}, {1, 0.5 / z}, {2, std::sqrt(0.125) / z}, {3, std::sqrt(0.125) / z}},
                     "T=2");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 2, 1.0f}), {{0, 2.0 / 3}, {1, 1.0 / 3}}, "top_k=2");
  // top_k = 3 with a tie at the cut: the lower id of the tied pair is kept.
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 3, 1.0f}), {{0, 0.5 / 0.875}, {1, 0.25 / 0.875}, {2, 0.125 / 0.875}},
                     "top_k=3");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 0.7f}), {{0, 2.0 / 3}, {1, 1.0 / 3}}, "top_p=0.7");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 0.5f}), {{0, 1.0}}, "top_p=0.5");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 0.8f}), {{0, 0.5 / 0.875}, {1, 0.25 / 0.875}, {2, 0.125 / 0.875}},
                     "top_p=0.8");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 3, 0.6f}), {{0, 0.5 / 0.75}, {1, 0.25 / 0.75}},
                     "top_k=3 then top_p=0.6");
}

// min_p keeps tokens with p >= min_p * p_max, judged after temperature; with top_k it keeps
// the intersection (both are most-likely prefixes), and top_p then cuts the renormalised rest.
TEST(SamplerTest, MinPMatchesHandComputed) {
  const auto l = FourTokens();  // p = 0.5, 0.25, 0.125, 0.125: ratios to the max 1, 0.5, 0.25, 0.25
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 1.0f, 0.3f}), {{0, 2.0 / 3}, {1, 1.0 / 3}},
                     "min_p=0.3");
  // (0.25 itself sits on the float-rounded ratio of the last two, so the cut is tested beside it.)
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 1.0f, 0.24f}),
                     {{0, 0.5}, {1, 0.25}, {2, 0.125}, {3, 0.125}}, "min_p=0.24 keeps all");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 1.0f, 0.6f}), {{0, 1.0}}, "min_p=0.6");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 1.0f, 1.0f}), {{0, 1.0}}, "min_p=1");
  // T = 2: ratios become sqrt(0.5) = 0.707, 0.5, 0.5: min_p 0.6 keeps tokens 0 and 1.
  const double a = std::sqrt(0.5), b = 0.5;
  ExpectDistribution(SamplingDistribution(l.data(), 4, {2.0f, 0, 1.0f, 0.6f}), {{0, a / (a + b)}, {1, b / (a + b)}},
                     "T=2 min_p=0.6");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 3, 1.0f, 0.3f}), {{0, 2.0 / 3}, {1, 1.0 / 3}},
                     "top_k=3 and min_p=0.3");
  ExpectDistribution(SamplingDistribution(l.data(), 4, {1.0f, 0, 0.6f, 0.2f}), {{0, 0.5 / 0.75}, {1, 0.25 / 0.75}},
                     "min_p=0.2 then top_p=0.6");
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = SampleNextToken(l.data(), 4, {1.0f, 0, 1.0f, 0.3f}, rng);
    EXPECT_TRUE(t == 0 || t == 1) << t;
  }
}

// A masked token (logit -inf, probability 0) never comes out, even where rounding leaves the
// draw past the last cumulative sum.
TEST(SamplerTest, MinusInfinityIsNeverDrawn) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> l = {0.0f, 0.0f, -inf};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) EXPECT_NE(SampleNextToken(l.data(), 3, {1.0f, 0, 1.0f}, rng), 2);
  const std::vector<float> only = {-inf, 3.0f, -inf};
  EXPECT_EQ(SampleNextToken(only.data(), 3, {1.0f, 0, 1.0f}, rng), 1);
  EXPECT_EQ(GreedyToken(only.data(), 3), 1);
}

TEST(SamplerTest, DrawFrequenciesMatch) {
  const auto l = FourTokens();
  // 99.9% quantiles of chi-square: 3 degrees of freedom 16.27, 1 degree 10.83.
  double chi2 = ChiSquare(l, {1.0f, 0, 1.0f}, 42, 20000, {{0, 0.5}, {1, 0.25}, {2, 0.125}, {3, 0.125}});
  std::printf("T=1, 20000 draws: chi2 = %.2f (bound 16.27)\n", chi2);
  EXPECT_LT(chi2, 16.27);
  const double z = std::sqrt(0.5) + 0.5 + 2 * std::sqrt(0.125);
  chi2 = ChiSquare(l, {2.0f, 0, 1.0f}, 7, 20000,
                   {{0, std::sqrt(0.5) / z}, {1, 0.5 / z}, {2, std::sqrt(0.125) / z}, {3, std::sqrt(0.125) / z}});
  std::printf("T=2, 20000 draws: chi2 = %.2f (bound 16.27)\n", chi2);
  EXPECT_LT(chi2, 16.27);
  chi2 = ChiSquare(l, {1.0f, 0, 0.7f}, 9, 20000, {{0, 2.0 / 3}, {1, 1.0 / 3}});
  std::printf("top_p=0.7, 20000 draws: chi2 = %.2f (bound 10.83)\n", chi2);
  EXPECT_LT(chi2, 10.83);
}

TEST(SamplerTest, TopKOneAndTinyTopPAreGreedy) {
  std::mt19937_64 gen(123);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(4096);
    for (auto& x : logits) x = normal(gen);
    const int32_t greedy = GreedyToken(logits.data(), logits.size());
    EXPECT_EQ(SampleNextToken(logits.data(), logits.size(), {1.0f, 1, 1.0f}, rng), greedy);
    EXPECT_EQ(SampleNextToken(logits.data(), logits.size(), {0.8f, 0, 1e-6f}, rng), greedy);
    EXPECT_EQ(SampleNextToken(logits.data(), logits.size(), {1.5f, 50, 1e-6f}, rng), greedy);
  }
}

// The nucleus over a 5000-token vocabulary against a reference that sorts everything: peaked
// logits (the nucleus fits the sorted head) and flat ones (it does not).
TEST(SamplerTest, NucleusMatchesFullSortReference) {
  std::mt19937_64 gen(2024);
  for (const float scale : {8.0f, 1.5f, 0.05f}) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> logits(5000);
    for (auto& x : logits) x = normal(gen);
    for (const float top_p : {0.3f, 0.9f, 0.99f}) {
      const float temperature = 0.7f;
      // Reference: softmax over everything, sort by (prob desc, id asc), smallest prefix >= top_p.
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
      });
      const double mx = logits[order[0]];
      double total = 0;
      for (float l : logits) total += std::exp((l - mx) / temperature);
      std::vector<std::pair<int32_t, double>> want;
      double mass = 0;
      for (int32_t id : order) {
        const double p = std::exp((logits[id] - mx) / temperature) / total;
        want.emplace_back(id, p);
        mass += p;
        if (mass >= top_p) break;
      }
      for (auto& w : want) w.second /= mass;
      const auto got = SamplingDistribution(logits.data(), logits.size(), {temperature, 0, top_p});
      std::printf("scale %.2f top_p %.2f: nucleus of %zu tokens (reference %zu)\n", scale, top_p, got.size(),
                  want.size());
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i].first, want[i].first) << i;
        ASSERT_NEAR(got[i].second, want[i].second, 1e-9) << i;
      }
    }
  }
}

TEST(SamplerTest, SameSeedSameTokens) {
  std::mt19937_64 gen(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> rows(32, std::vector<float>(512));
  for (auto& r : rows) {
    for (auto& x : r) x = normal(gen);
  }
  auto draw = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> out;
    for (const auto& r : rows) out.push_back(SampleNextToken(r.data(), r.size(), {1.0f, 40, 0.95f}, rng));
    return out;
  };
  EXPECT_EQ(draw(1234), draw(1234));
  EXPECT_NE(draw(1234), draw(4321));
}

}  // namespace
}  // namespace tandem::engine
