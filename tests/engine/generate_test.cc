// Single-sequence generation (engine/generate.cc) over a fake model whose greedy continuation of
// t is t+1, t+2, ...: the steps it plans (prefill then one token per step, positions, a pool just
// large enough), eos and length stops, PromptLogits' rows, and SampleToken's draws. The real
// models' continuations are checked against the golden in tests/engine/cpu and tests/engine/cuda.
#include "engine/generate.h"

#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "tests/engine/fake_model.h"

namespace tandem::engine {
namespace {

using testing::FakeModel;

TEST(Sampling, GreedyAndSeededTemperature) {
  std::mt19937_64 rng(7);
  const std::vector<float> logits = {0.0f, std::log(3.0f), -1.0f, 0.5f};
  EXPECT_EQ(SampleToken(logits.data(), 4, 0.0f, rng), 1);  // argmax
  // At T = 1 the draw follows softmax(logits): p(1) = 3 / (1 + 3 + e^-1 + e^0.5) = 0.5275.
  const double p1 = 3.0 / (1.0 + 3.0 + std::exp(-1.0) + std::exp(0.5));
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += SampleToken(logits.data(), 4, 1.0f, rng) == 1;
  std::printf("p(token 1) sampled %.4f, expected %.4f\n", static_cast<double>(ones) / n, p1);
  EXPECT_NEAR(static_cast<double>(ones) / n, p1, 0.02);
  // The same seed gives the same sequence of draws.
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(SampleToken(logits.data(), 4, 0.8f, a), SampleToken(logits.data(), 4, 0.8f, b));
}

TEST(Sampling, GreedyTieGoesToTheLowestId) {
  std::mt19937_64 rng(1);
  const std::vector<float> logits = {0.5f, 2.0f, -3.0f, 2.0f};
  EXPECT_EQ(SampleToken(logits.data(), 4, 0.0f, rng), 1);
}

TEST(Generate, PrefillThenOneTokenPerStepUntilLength) {
  FakeModel model;
  StepDriver driver(&model, nullptr);
  GenerateOptions opt;
  opt.max_tokens = 4;
  opt.block_size = 2;
  auto r = Generate(driver, {1, 2, 3}, opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->token_ids, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_EQ(r->decode_steps, 3);
  // 3 + 4 positions in blocks of 2: a pool of 4 blocks, allocated once.
  ASSERT_EQ(model.pools.size(), 1u);
  EXPECT_EQ(model.pools[0], (std::pair<int32_t, int32_t>{4, 2}));
  // The prompt in one chunk, then each new token at the next position, one block table throughout.
  ASSERT_EQ(model.steps.size(), 4u);
  const std::vector<std::vector<int32_t>> tokens = {{1, 2, 3}, {4}, {5}, {6}};
  const std::vector<int32_t> starts = {0, 3, 4, 5};
  for (size_t i = 0; i < model.steps.size(); ++i) {
    auto b = StepBatch::Deserialize(model.steps[i]);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(b->seqs.size(), 1u);
    EXPECT_EQ(b->seqs[0].tokens, tokens[i]) << "step " << i;
    EXPECT_EQ(b->seqs[0].start_pos, starts[i]) << "step " << i;
    EXPECT_EQ(b->seqs[0].block_table, (std::vector<int32_t>{0, 1, 2, 3})) << "step " << i;
    EXPECT_TRUE(b->seqs[0].want_logits);
  }
  // A second generation that fits keeps the pool.
  opt.max_tokens = 2;
  ASSERT_TRUE(Generate(driver, {0}, opt).ok());
  EXPECT_EQ(model.pools.size(), 1u);
}

TEST(Generate, StopsAtEosWithoutReturningIt) {
  FakeModel model;
  StepDriver driver(&model, nullptr);
  GenerateOptions opt;
  opt.max_tokens = 10;
  opt.eos_ids = {9, 5};
  auto r = Generate(driver, {2}, opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(model.steps.size(), 3u);  // the step that produced the eos ran
}

TEST(Generate, RefusesEmptyPromptAndNegativeLengthAndRunsNothingForZero) {
  FakeModel model;
  StepDriver driver(&model, nullptr);
  GenerateOptions opt;
  EXPECT_EQ(Generate(driver, {}, opt).status().message(), "generate: empty prompt");
  opt.max_tokens = -1;
  EXPECT_EQ(Generate(driver, {1}, opt).status().message(), "generate: max_tokens < 0");
  opt.max_tokens = 0;
  auto r = Generate(driver, {1}, opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->token_ids.empty());
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_TRUE(model.steps.empty());
  EXPECT_TRUE(model.pools.empty());
}

TEST(Generate, PromptLogitsHasARowPerPosition) {
  FakeModel model;
  StepDriver driver(&model, nullptr);
  auto l = PromptLogits(driver, {3, 0, 6}, 2);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->rows(), 3);
  EXPECT_EQ(l->positions, (std::vector<int32_t>{0, 1, 2}));
  std::mt19937_64 rng(0);
  EXPECT_EQ(SampleToken(l->row(0), l->vocab, 0.0f, rng), 4);
  EXPECT_EQ(SampleToken(l->row(1), l->vocab, 0.0f, rng), 1);
  EXPECT_EQ(SampleToken(l->row(2), l->vocab, 0.0f, rng), 7);
  ASSERT_EQ(model.pools.size(), 1u);
  EXPECT_EQ(model.pools[0], (std::pair<int32_t, int32_t>{2, 2}));
  EXPECT_EQ(PromptLogits(driver, {}).status().message(), "logits: empty prompt");
}

}  // namespace
}  // namespace tandem::engine
