// The CPU reference of the sampling kernel (kernels/sample.h) on small hand-computed rows: ties at
// the threshold, top_p taken of the top_k set, u at the ends, extreme temperatures, -inf logits. Every
// u sits well away from a CDF step, so the answers do not depend on rounding. Runs without a GPU.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/sample.h"

namespace tandem::kernels {
namespace {

constexpr float kInf = INFINITY;
constexpr float kAlmostOne = 0.99999994f;  // the largest float below 1

int32_t Sample(const std::vector<float>& x, float temperature, int32_t top_k, float top_p, float u) {
  SampleParams p;
  p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.u = u;
  int32_t out = -1;
  ref::sample(&out, x.data(), &p, 1, static_cast<int64_t>(x.size()));
  return out;
}

TEST(sample_ref, NoFilterIsInverseCdfInIndexOrder) {
  const std::vector<float> flat = {0, 0, 0, 0};  // p = 1/4 each
  EXPECT_EQ(Sample(flat, 1, 0, 1, 0.0f), 0);
  EXPECT_EQ(Sample(flat, 1, 0, 1, 0.2f), 0);
  EXPECT_EQ(Sample(flat, 1, 0, 1, 0.3f), 1);
  EXPECT_EQ(Sample(flat, 1, 0, 1, 0.6f), 2);
  EXPECT_EQ(Sample(flat, 1, 0, 1, kAlmostOne), 3);
  EXPECT_EQ(Sample(flat, 1, 4, 1, 0.6f), 2);    // top_k == V: off
  EXPECT_EQ(Sample(flat, 1, 100, 1, 0.6f), 2);  // top_k > V: off
}

TEST(sample_ref, TopKKeepsTiesAtTheThreshold) {
  // p ∝ {e^-2, 1, 1, e^-1}: the two maxima tie.
  const std::vector<float> x = {1, 3, 3, 2};
  EXPECT_EQ(Sample(x, 1, 1, 1, 0.25f), 1);  // top_k = 1 keeps both maxima: S = {1, 2}
  EXPECT_EQ(Sample(x, 1, 1, 1, 0.75f), 2);
  EXPECT_EQ(Sample(x, 1, 2, 1, 0.75f), 2);  // the same set
  // top_k = 3: S = {1, 2, 3}, mass 2 + e^-1 = 2.368; u 0.8 -> 1.894 (index 2 reaches 2),
  // u 0.9 -> 2.131 (index 3 reaches 2.368).
  EXPECT_EQ(Sample(x, 1, 3, 1, 0.8f), 2);
  EXPECT_EQ(Sample(x, 1, 3, 1, 0.9f), 3);
  EXPECT_EQ(Sample(x, 1, 3, 1, 0.1f), 1);  // index 0 is out of S
  // top_k = 1 on a unique maximum is argmax whatever u.
  const std::vector<float> y = {0.5f, -1, 2, 1.9f};
  for (float u : {0.0f, 0.5f, kAlmostOne}) EXPECT_EQ(Sample(y, 1, 1, 1, u), 2);
}

TEST(sample_ref, TopPKeepsTiesAtTheThreshold) {
  // p ∝ {e^-1, 1, 1, e^-2} / 2.503: each maximum alone holds 0.3995 >= 0.3, yet both are kept.
  const std::vector<float> x = {1, 2, 2, 0};
  EXPECT_EQ(Sample(x, 1, 0, 0.3f, 0.25f), 1);
  EXPECT_EQ(Sample(x, 1, 0, 0.3f, 0.75f), 2);
  // top_p = 0.85: the maxima hold 0.799 < 0.85, with e^-1 0.946 >= 0.85: S = {0, 1, 2}, mass
  // 2.368; u 0.1 -> 0.237 < e^-1 = 0.368: index 0. u 0.99 -> 2.344: index 2 (index 3 is out).
  EXPECT_EQ(Sample(x, 1, 0, 0.85f, 0.1f), 0);
  EXPECT_EQ(Sample(x, 1, 0, 0.85f, 0.99f), 2);
  // A tiny top_p keeps the maxima only.
  EXPECT_EQ(Sample(x, 1, 0, 1e-6f, 0.0f), 1);
}

TEST(sample_ref, TopPIsTakenOfTheTopKSet) {
  // p = {0.1, 0.4, 0.2, 0.3}; by likelihood 1 (0.4), 3 (0.3), 2 (0.2), 0 (0.1).
  const std::vector<float> x = {std::log(0.1f), std::log(0.4f), std::log(0.2f), std::log(0.3f)};
  // top_k 3 -> {1, 3, 2}, mass 0.9; top_p 0.5 of it is 0.45 -> {1, 3} (0.7).
  EXPECT_EQ(Sample(x, 1, 3, 0.5f, 0.5f), 1);  // 0.35: index 1 (0.4)
  EXPECT_EQ(Sample(x, 1, 3, 0.5f, 0.6f), 3);  // 0.42: index 3 (0.7)
  EXPECT_EQ(Sample(x, 1, 3, 0.5f, kAlmostOne), 3);
  // top_k 2 -> {1, 3}, mass 0.7; top_p 0.5 of it is 0.35 -> {1} alone (over the whole
  // distribution, 0.5 would have kept {1, 3}).
  for (float u : {0.0f, 0.5f, 0.6f, kAlmostOne}) EXPECT_EQ(Sample(x, 1, 2, 0.5f, u), 1) << "u " << u;
  // top_k 3 -> {1, 3, 2}; top_p 0.75 of 0.9 is 0.675 -> {1, 3} (0.7): index 2 is never drawn
  // (over the whole distribution, 0.75 would have kept it).
  for (float u : {0.0f, 0.3f, 0.55f, 0.65f, 0.9f, kAlmostOne}) {
    const int32_t id = Sample(x, 1, 3, 0.75f, u);
    EXPECT_TRUE(id == 1 || id == 3) << "u " << u << " id " << id;
  }
  EXPECT_EQ(Sample(x, 1, 3, 0.75f, 0.55f), 1);  // 0.385 < 0.4
  EXPECT_EQ(Sample(x, 1, 3, 0.75f, 0.6f), 3);   // 0.42 > 0.4
  // top_k 2, top_p 0.8 of 0.7 is 0.56 -> {1, 3}.
  EXPECT_EQ(Sample(x, 1, 2, 0.8f, 0.55f), 1);
  EXPECT_EQ(Sample(x, 1, 2, 0.8f, 0.6f), 3);
  // top_p 0.35 -> {1} alone, whatever top_k.
  EXPECT_EQ(Sample(x, 1, 3, 0.35f, kAlmostOne), 1);
  // Without the filters index 2 is reachable: mass before it 0.5, through it 0.7.
  EXPECT_EQ(Sample(x, 1, 0, 1, 0.6f), 2);
}

TEST(sample_ref, UJustBelowOnePicksTheLastKeptIndex) {
  // S = {0, 2} (top_k 2): the last kept index is 2, not V - 1.
  const std::vector<float> x = {5, 0, 5, -10, 1};
  EXPECT_EQ(Sample(x, 1, 2, 1, kAlmostOne), 2);
  EXPECT_EQ(Sample(x, 1, 2, 1, 0.0f), 0);
  EXPECT_EQ(Sample(x, 1, 0, 1, kAlmostOne), 4);
}

TEST(sample_ref, ExtremeTemperatures) {
  // T = 100: p ≈ {0.4975, 0.5025}.
  EXPECT_EQ(Sample({0, 1}, 100, 0, 1, 0.49f), 0);
  EXPECT_EQ(Sample({0, 1}, 100, 0, 1, 0.51f), 1);
  // T = 0.01: a_0 = 10, p_0 = e^-10 / (1 + e^-10) = 4.54e-5.
  EXPECT_EQ(Sample({0, 0.1f}, 0.01f, 0, 1, 1e-5f), 0);
  EXPECT_EQ(Sample({0, 0.1f}, 0.01f, 0, 1, 1e-4f), 1);
}

TEST(sample_ref, NegativeInfinityLogitsAreNeverDrawn) {
  const std::vector<float> x = {-kInf, 2, -kInf, 2, -kInf};
  EXPECT_EQ(Sample(x, 1, 0, 1, 0.4f), 1);
  EXPECT_EQ(Sample(x, 1, 0, 1, 0.6f), 3);
  EXPECT_EQ(Sample(x, 1, 0, 1, kAlmostOne), 3);  // not index 4: it is -inf
  EXPECT_EQ(Sample(x, 1, 1, 1, 0.4f), 1);
  EXPECT_EQ(Sample(x, 1, 0, 0.1f, 0.6f), 3);
  EXPECT_EQ(Sample({-1e30f, 0, -1e30f}, 1, 0, 1, kAlmostOne), 1);  // very negative: p = 0
}

TEST(sample_ref, RowsTakeTheirOwnParameters) {
  const std::vector<float> x = {0, 0, 0, 0, /* row 1 */ 1, 3, 3, 2};
  SampleParams p[2];
  p[0].u = 0.6f;
  p[1].top_k = 1, p[1].u = 0.75f;
  int32_t out[2] = {-1, -1};
  ref::sample(out, x.data(), p, 2, 4);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], 2);
}

TEST(sample_ref, RejectsInvalidParameters) {
  SampleParams ok;
  EXPECT_TRUE(SampleParamsValid(ok));
  SampleParams p = ok;
  p.temperature = 0;  // greedy: argmax, not sample
  EXPECT_FALSE(SampleParamsValid(p));
  p = ok, p.temperature = -1;
  EXPECT_FALSE(SampleParamsValid(p));
  p = ok, p.top_p = 0;
  EXPECT_FALSE(SampleParamsValid(p));
  p = ok, p.top_p = 1.5f;
  EXPECT_FALSE(SampleParamsValid(p));
  p = ok, p.u = 1;
  EXPECT_FALSE(SampleParamsValid(p));
  p = ok, p.top_k = -1;
  EXPECT_FALSE(SampleParamsValid(p));
  EXPECT_DEATH(Sample({0, 1}, 0.0f, 0, 1, 0.5f), "invalid parameters");
}

}  // namespace
}  // namespace tandem::kernels
