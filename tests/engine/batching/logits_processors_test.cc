// The logits processors against rows worked out by hand: logit_bias, the Hugging Face repetition
// penalty over prompt and output, OpenAI's frequency and presence penalties, their order, and
// masking.
#include "engine/batching/logits_processors.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

void ExpectRow(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << "token " << i;
}

TEST(LogitsProcessorsTest, LogitBiasAddsPerToken) {
  std::vector<float> row = {1.0f, -2.0f, 0.5f, 3.0f};
  LogitAdjustments a;
  a.logit_bias = {{1, 5.0f}, {3, -100.0f}};
  EXPECT_TRUE(a.any());
  EXPECT_FALSE(a.penalties());
  AdjustLogits(row.data(), 4, a, TokenHistory{});
  ExpectRow(row, {1.0f, 3.0f, 0.5f, -97.0f});
}

TEST(LogitsProcessorsTest, RepetitionPenaltyDividesPositiveMultipliesNegativeOncePerToken) {
  std::vector<float> row = {2.0f, -1.0f, 3.0f, -4.0f, 1.0f};
  LogitAdjustments a;
  a.repetition_penalty = 2.0f;
  TokenHistory h;
  h.prompt = {0, 1};
  h.output_counts = {{1, 3}, {3, 1}};  // token 1 in both: penalised once
  AdjustLogits(row.data(), 5, a, h);
  // 2/2, -1*2, untouched, -4*2, untouched
  ExpectRow(row, {1.0f, -2.0f, 3.0f, -8.0f, 1.0f});
}

TEST(LogitsProcessorsTest, FrequencyAndPresenceCountOutputOnly) {
  std::vector<float> row = {1.0f, 1.0f, 1.0f, 1.0f};
  LogitAdjustments a;
  a.frequency_penalty = 0.5f;
  a.presence_penalty = 0.25f;
  TokenHistory h;
  h.prompt = {0};                       // the prompt does not count for these two
  h.output_counts = {{1, 1}, {2, 4}};
  AdjustLogits(row.data(), 4, a, h);
  // token 1: 1 - (1*0.5 + 0.25); token 2: 1 - (4*0.5 + 0.25)
  ExpectRow(row, {1.0f, 0.25f, -1.25f, 1.0f});
  // Negative values encourage repetition.
  std::vector<float> row2 = {0.0f, 0.0f};
  a.frequency_penalty = -1.0f;
  a.presence_penalty = 0.0f;
  h.output_counts = {{1, 2}};
  AdjustLogits(row2.data(), 2, a, h);
  ExpectRow(row2, {0.0f, 2.0f});
}

// vLLM's order: the bias first, then the repetition penalty on the biased logit, then the
// frequency / presence penalties.
TEST(LogitsProcessorsTest, BiasThenRepetitionThenFrequency) {
  std::vector<float> row = {1.0f};
  LogitAdjustments a;
  a.logit_bias = {{0, 3.0f}};
  a.repetition_penalty = 2.0f;
  a.frequency_penalty = 1.0f;
  TokenHistory h;
  h.output_counts = {{0, 1}};
  AdjustLogits(row.data(), 1, a, h);
  ExpectRow(row, {(1.0f + 3.0f) / 2.0f - 1.0f});
  // A negative biased logit is multiplied instead.
  std::vector<float> row2 = {1.0f};
  a.logit_bias = {{0, -3.0f}};
  AdjustLogits(row2.data(), 1, a, h);
  ExpectRow(row2, {(1.0f - 3.0f) * 2.0f - 1.0f});
}

TEST(LogitsProcessorsTest, NeutralSettingsChangeNothing) {
  std::vector<float> row = {1.0f, -2.0f};
  LogitAdjustments a;
  EXPECT_FALSE(a.any());
  TokenHistory h;
  h.prompt = {0, 1};
  h.output_counts = {{0, 5}};
  AdjustLogits(row.data(), 2, a, h);
  ExpectRow(row, {1.0f, -2.0f});
}

TEST(LogitsProcessorsTest, MaskSetsMinusInfinityAndSkipsIdsOutsideTheVocabulary) {
  std::vector<float> row = {1.0f, 2.0f, 3.0f};
  MaskTokens(row.data(), 3, {2, 7, -1});
  EXPECT_FLOAT_EQ(row[0], 1.0f);
  EXPECT_FLOAT_EQ(row[1], 2.0f);
  EXPECT_EQ(row[2], -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace tandem::engine
