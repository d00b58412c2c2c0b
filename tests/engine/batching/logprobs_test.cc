// Logprobs against a log-softmax computed here: the sampled token's value, the top list's order
// (ties by lower id), k larger than the vocabulary, rows with huge and -infinity logits.
#include "engine/batching/logprobs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

// log_softmax the plain way, in long double, for rows of moderate logits.
std::vector<double> PlainLogSoftmax(const std::vector<float>& row) {
  long double sum = 0;
  for (float x : row) sum += std::exp(static_cast<long double>(x));
  std::vector<double> out;
  for (float x : row) out.push_back(static_cast<double>(x - std::log(sum)));
  return out;
}

TEST(LogprobsTest, EqualALogSoftmaxAndListTheBestInOrder) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(1000);
  for (float& x : row) x = normal(rng);
  const std::vector<double> want = PlainLogSoftmax(row);
  const double lse = LogSumExp(row.data(), row.size());
  const TokenLogprob got = TokenLogprobOf(row.data(), row.size(), lse, 123, 5);
  EXPECT_EQ(got.token, 123);
  EXPECT_NEAR(got.logprob, want[123], 1e-5);
  // The five largest by a full sort of the expected values.
  std::vector<int32_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return want[a] > want[b]; });
  ASSERT_EQ(got.top.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(got.top[i].first, ids[i]) << "rank " << i;
    EXPECT_NEAR(got.top[i].second, want[ids[i]], 1e-5) << "rank " << i;
    std::printf("top %zu: id %d logprob %.5f (want %.5f)\n", i, got.top[i].first, got.top[i].second, want[ids[i]]);
  }
}

TEST(LogprobsTest, TiesGoToTheLowerIdAndKIsCappedByTheVocabulary) {
  const std::vector<float> row = {1.0f, 3.0f, 2.0f, 3.0f};
  const TokenLogprob got = TokenLogprobOf(row.data(), row.size(), LogSumExp(row.data(), row.size()), 2, 10);
  ASSERT_EQ(got.top.size(), 4u);
  EXPECT_EQ(got.top[0].first, 1);
  EXPECT_EQ(got.top[1].first, 3);
  EXPECT_EQ(got.top[2].first, 2);
  EXPECT_EQ(got.top[3].first, 0);
  const std::vector<double> want = PlainLogSoftmax(row);
  EXPECT_NEAR(got.logprob, want[2], 1e-6);
  double mass = 0;
  for (const auto& [id, lp] : got.top) mass += std::exp(lp);
  EXPECT_NEAR(mass, 1.0, 1e-6);
  EXPECT_TRUE(TokenLogprobOf(row.data(), row.size(), 0.0, 0, 0).top.empty());
}

TEST(LogprobsTest, LargeAndMaskedLogitsStayFinite) {
  // exp(1000) overflows a double: the maximum must be taken out first.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row = {1000.0f, 1000.0f - std::log(3.0f), -inf};
  const double lse = LogSumExp(row.data(), row.size());
  EXPECT_NEAR(lse, 1000.0 + std::log(4.0 / 3.0), 1e-4);
  const TokenLogprob got = TokenLogprobOf(row.data(), row.size(), lse, 0, 3);
  EXPECT_NEAR(got.logprob, std::log(0.75), 1e-4);
  EXPECT_EQ(got.top[2].first, 2);
  EXPECT_EQ(got.top[2].second, -inf);
}

}  // namespace
}  // namespace tandem::engine
