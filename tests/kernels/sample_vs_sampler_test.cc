// The sampling kernel's semantics (kernels/sample.h, through its CPU reference) against the serving
// sampler (engine/batching/sampler.h): the same kept tokens with the same probabilities, on random
// rows without equal keys, and the documented differences on rows with them. Runs without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/batching/sampler.h"
#include "kernels/sample.h"

namespace tandem::kernels {
namespace {

using Dist = std::vector<std::pair<int32_t, double>>;

// The serving sampler's distribution as ref::sample_distribution lists it: tokens of p > 0 (the
// only ones a draw can return), in vocabulary order.
Dist HostDistribution(const std::vector<float>& x, float temperature, int32_t top_k, float top_p) {
  Dist d = engine::SamplingDistribution(x.data(), static_cast<int64_t>(x.size()),
                                        engine::SamplerSettings{temperature, top_k, top_p});
  d.erase(std::remove_if(d.begin(), d.end(), [](const auto& e) { return !(e.second > 0); }), d.end());
  std::sort(d.begin(), d.end());
  return d;
}

Dist RefDistribution(const std::vector<float>& x, float temperature, int32_t top_k, float top_p) {
  SampleParams p;
  p.temperature = temperature, p.top_k = top_k, p.top_p = top_p;
  return ref::sample_distribution(x.data(), static_cast<int64_t>(x.size()), p);
}

std::vector<int32_t> Ids(const Dist& d) {
  std::vector<int32_t> ids;
  for (const auto& e : d) ids.push_back(e.first);
  return ids;
}

// The largest relative difference of the probabilities of two distributions over the same tokens.
double MaxRelativeError(const Dist& a, const Dist& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i].second - b[i].second) / b[i].second);
  return worst;
}

// The key of sample.h: the bit pattern of (m - x) / temperature in float.
uint32_t Key(float m, float x, float temperature) {
  const float a = (m - x) / temperature;
  uint32_t k;
  std::memcpy(&k, &a, sizeof(k));
  return a == 0.0f ? 0u : k;
}

// V normal logits of standard deviation `scale`, redrawn until no two tokens share a key at this
// temperature (at V = 151936 a few hundred pairs of equal floats are expected otherwise), so the
// two samplers' tie rules never apply.
std::vector<float> RowWithoutTies(int64_t V, float scale, float temperature, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(V);
  for (float& v : x) v = normal(rng);
  std::vector<std::pair<uint32_t, int64_t>> keys(V);
  for (;;) {
    const float m = *std::max_element(x.begin(), x.end());
    for (int64_t i = 0; i < V; ++i) keys[i] = {Key(m, x[i], temperature), i};
    std::sort(keys.begin(), keys.end());
    bool tied = false;
    for (int64_t i = 1; i < V; ++i) {
      if (keys[i].first == keys[i - 1].first) {
        x[keys[i].second] = normal(rng);
        tied = true;
      }
    }
    if (!tied) return x;
  }
}

// Random rows at V 1000 and 151936 with neither filter, top_k only, top_p only and both: the kept
// sets must be equal and the probabilities equal within kRelTol. Both sides work in double; the
// reference's exponents a_i are rounded to float (sample.h), a relative error of about a_i * 1.2e-7
// in p_i, so the logit spread over the temperature is kept to a_i <= ~40 where the tail is kept.
// Where top_p lies within kRelTol of a nucleus boundary the two may cut one token apart: such a
// row ("boundary") must equal the host's distribution at top_p * (1 -+ kRelTol) instead.
TEST(sample_vs_sampler, RandomRowsKeepTheSameTokensWithTheSameProbabilities) {
  constexpr double kRelTol = 1e-5;
  struct Case {
    int64_t V;
    int rows;
    float scale, temperature;
    int32_t top_k;
    float top_p;
  };
  const std::vector<Case> cases = {
      {1000, 64, 2, 1, 0, 1},         {1000, 64, 1, 0.3f, 0, 1},      {1000, 64, 2, 1, 1, 1},
      {1000, 64, 2, 0.7f, 10, 1},     {1000, 64, 2, 1.5f, 999, 1},    {1000, 64, 2, 1, 0, 0.9f},
      {1000, 64, 1, 0.5f, 0, 0.5f},   {1000, 64, 2, 2, 0, 0.99f},     {1000, 64, 2, 0.7f, 50, 0.9f},
      {1000, 64, 2, 1, 200, 0.5f},    {1000, 64, 3, 0.3f, 20, 0.95f}, {1000, 64, 2, 1, 5, 0.3f},
      {151936, 6, 2, 0.7f, 0, 1},     {151936, 6, 2, 1, 50, 1},       {151936, 6, 2, 1, 0, 0.9f},
      {151936, 6, 2, 0.5f, 0, 0.95f}, {151936, 6, 2, 0.7f, 50, 0.9f}, {151936, 6, 2, 1, 1000, 0.5f},
      {151936, 6, 4, 0.3f, 40, 0.8f}, {151936, 6, 2, 1, 5000, 0.9f},
  };
  std::mt19937_64 rng(20261202);
  for (const Case& c : cases) {
    int exact = 0, boundary = 0;
    double worst = 0, kept = 0;
    for (int r = 0; r < c.rows; ++r) {
      const auto x = RowWithoutTies(c.V, c.scale, c.temperature, rng);
      const Dist got = RefDistribution(x, c.temperature, c.top_k, c.top_p);
      const Dist want = HostDistribution(x, c.temperature, c.top_k, c.top_p);
      kept += static_cast<double>(want.size());
      if (Ids(got) == Ids(want)) {
        ++exact;
        worst = std::max(worst, MaxRelativeError(got, want));
        EXPECT_LE(MaxRelativeError(got, want), kRelTol) << c.V << " row " << r;
        continue;
      }
      ASSERT_LT(c.top_p, 1.0f) << c.V << " row " << r << ": " << got.size() << " kept, the sampler " << want.size();
      bool matched = false;
      for (double f : {1 - kRelTol, 1 + kRelTol}) {
        const float p = static_cast<float>(std::min(1.0, c.top_p * f));
        const Dist near = HostDistribution(x, c.temperature, c.top_k, p);
        if (Ids(got) == Ids(near)) {
          matched = true;
          worst = std::max(worst, MaxRelativeError(got, near));
          EXPECT_LE(MaxRelativeError(got, near), kRelTol) << c.V << " row " << r;
        }
      }
      EXPECT_TRUE(matched) << c.V << " row " << r << ": " << got.size() << " kept, the sampler " << want.size()
                           << " (also at top_p within " << kRelTol << ")";
      boundary += matched ? 1 : 0;
    }
    std::printf("V %-6lld T %-4g top_k %-4d top_p %-4g: %2d rows, %2d same set, %d at a top_p boundary; "
                "%.1f tokens kept on average; max relative probability error %.2e\n",
                static_cast<long long>(c.V), c.temperature, c.top_k, c.top_p, c.rows, exact, boundary,
                kept / c.rows, worst);
  }
}

// ref::sample draws from ref::sample_distribution: at u values inside each token's CDF interval
// (in vocabulary order) it returns that token.
TEST(sample_vs_sampler, RefSampleDrawsFromItsDistribution) {
  std::mt19937_64 rng(7);
  for (const auto& [top_k, top_p] : std::vector<std::pair<int32_t, float>>{{0, 1}, {20, 1}, {0, 0.8f}, {30, 0.7f}}) {
    const auto x = RowWithoutTies(1000, 2, 1, rng);
    SampleParams p;
    p.top_k = top_k, p.top_p = top_p;
    const Dist d = ref::sample_distribution(x.data(), 1000, p);
    double cum = 0;
    int checked = 0;
    for (const auto& [id, prob] : d) {
      if (prob > 1e-4) {  // u well inside the step, away from rounding
        p.u = static_cast<float>(cum + prob / 2);
        int32_t out = -1;
        ref::sample(&out, x.data(), &p, 1, 1000);
        EXPECT_EQ(out, id) << "top_k " << top_k << " top_p " << top_p << " u " << p.u;
        ++checked;
      }
      cum += prob;
    }
    EXPECT_NEAR(cum, 1.0, 1e-12);
    std::printf("top_k %-3d top_p %-4g: %zu tokens kept, %d drawn at the middle of their step\n", top_k, top_p,
                d.size(), checked);
  }
}

// Where keys are equal at a threshold the two differ exactly as sample.h documents: the sampler
// cuts by (logit, lower id), the reference (and kernel) keeps every token of the threshold's key.
TEST(sample_vs_sampler, EqualKeysAtAThresholdAreAllKept) {
  // top_k = 1 with equal maxima: the sampler is greedy (lowest id), the kernel keeps both.
  const std::vector<float> maxima = {1, 3, 3, 2};
  EXPECT_EQ(Ids(HostDistribution(maxima, 1, 1, 1)), (std::vector<int32_t>{1}));
  EXPECT_EQ(Ids(RefDistribution(maxima, 1, 1, 1)), (std::vector<int32_t>{1, 2}));
  // The top_k-th and the next token tie.
  const std::vector<float> at_k = {3, 2, 2, 1};
  EXPECT_EQ(Ids(HostDistribution(at_k, 1, 2, 1)), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(Ids(RefDistribution(at_k, 1, 2, 1)), (std::vector<int32_t>{0, 1, 2}));
  // p ∝ {1, e^-1, e^-1, e^-2}: {0} holds 0.534 < 0.6, {0, 1} 0.731; the kernel adds token 2.
  const std::vector<float> at_p = {2, 1, 1, 0};
  EXPECT_EQ(Ids(HostDistribution(at_p, 1, 0, 0.6f)), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(Ids(RefDistribution(at_p, 1, 0, 0.6f)), (std::vector<int32_t>{0, 1, 2}));
  // Distinct logits whose keys round together: (1000 - 100) and (1000 - 100.00001) are both 900
  // in float (its spacing there is 6e-5). The sampler keeps the larger logit (token 2).
  const std::vector<float> rounded = {1000, 100, std::nextafter(100.0f, 200.0f), 50};
  ASSERT_EQ(Key(1000, rounded[1], 1000), Key(1000, rounded[2], 1000));
  EXPECT_EQ(Ids(HostDistribution(rounded, 1000, 2, 1)), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(Ids(RefDistribution(rounded, 1000, 2, 1)), (std::vector<int32_t>{0, 1, 2}));
  // Without a tie at the thresholds the sets agree (token 3, the least likely, is cut by both).
  EXPECT_EQ(Ids(HostDistribution(rounded, 1000, 3, 1)), Ids(RefDistribution(rounded, 1000, 3, 1)));
}

}  // namespace
}  // namespace tandem::kernels
