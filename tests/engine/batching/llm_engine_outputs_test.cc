// What the engine reports beyond tokens (issue 16): logprobs and prompt logprobs, equal to a
// log-softmax computed here from the model's own logits, and n > 1 choices sharing one prefill:
// greedy choices identical to n = 1, seeded choices reproducible (choice i draws with seed + i),
// the event order, and every KV block freed after the choices finish or are cancelled. Over the
// fake model (exact rows) and the cpu backend with qwen3moe-tiny.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/batching/llm_engine.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/batching/engine_outputs_checks.h"
#include "tests/engine/batching/llm_engine_test_util.h"
#include "tests/engine/fake_model.h"

namespace tandem::engine {
namespace {

using testing::ChoicesSink;
using testing::FakeModel;
using testing::ReceivedChoices;

using testing::ExpectNoProtocolErrors;

GenerationRequest Request(std::string id, std::vector<int32_t> prompt, int max_tokens, int n) {
  return testing::ChoicesRequest(std::move(id), std::move(prompt), max_tokens, n);
}

// A FakeModel of `vocab` tokens (with `eos` ids), its driver, and an engine of SmallOptions.
struct FakeEngine {
  explicit FakeEngine(int64_t vocab, std::vector<int64_t> eos = {}) : model(vocab), driver(&model, nullptr) {
    model.SetEos(std::move(eos));
    auto e = LLMEngine::Create(&driver, nullptr, testing::SmallOptions());
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok()) engine = std::move(*e);
  }
  FakeModel model;
  StepDriver driver;
  std::unique_ptr<LLMEngine> engine;
};

// FakeModel's row after token t: 1 at t + 1, 0 elsewhere (tests/engine/fake_model.h).
TEST(EngineOutputsFakeModelTest, ThreeChoicesWithLogprobsInOrder) {
  FakeEngine fake(8);
  ASSERT_NE(fake.engine, nullptr);
  const auto& engine = fake.engine;
  GenerationRequest r = Request("three", {1, 2, 3, 4, 5, 6}, 3, 3);
  r.params.logprobs = 2;
  r.params.prompt_logprobs = 1;
  ChoicesSink sink(3);
  ASSERT_TRUE(engine->Submit(r, sink.Callback()).ok());
  ASSERT_TRUE(sink.Wait());
  const ReceivedChoices got = sink.Get();
  ExpectNoProtocolErrors(got);
  const double hit = 1.0 - std::log(std::exp(1.0) + 7.0), miss = -std::log(std::exp(1.0) + 7.0);
  std::printf("log_softmax of the fake row: %.6f at the next token, %.6f elsewhere\n", hit, miss);
  for (int c = 0; c < 3; ++c) {
    const auto& ch = got.choices[c];
    EXPECT_EQ(ch.tokens, (std::vector<int32_t>{7, 0, 1})) << "choice " << c;
    EXPECT_EQ(ch.finish_reason, "length");
    ASSERT_EQ(ch.logprobs.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      const auto& lp = ch.logprobs[i];
      EXPECT_EQ(lp.token, ch.tokens[i]);
      EXPECT_NEAR(lp.logprob, hit, 1e-6);
      ASSERT_EQ(lp.top.size(), 2u);
      EXPECT_EQ(lp.top[0].first, ch.tokens[i]);
      // The runner-up is a tie of seven: the lowest id that is not the token.
      EXPECT_EQ(lp.top[1].first, ch.tokens[i] == 0 ? 1 : 0);
      EXPECT_NEAR(lp.top[1].second, miss, 1e-6);
    }
  }
  // Prompt tokens 1..5, each the argmax after the one before it.
  ASSERT_EQ(got.prompt_logprobs.size(), 5u);
  EXPECT_EQ(got.prompt_logprob_events, 1);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(got.prompt_logprobs[i].token, r.prompt_ids[i + 1]);
    EXPECT_NEAR(got.prompt_logprobs[i].logprob, hit, 1e-6);
    ASSERT_EQ(got.prompt_logprobs[i].top.size(), 1u);
  }
  EXPECT_EQ(got.prompt_tokens, 6);
  EXPECT_EQ(got.completion_tokens, 9);
  EXPECT_EQ(engine->Stats().kv_blocks_used, 0);
  engine->Shutdown();
  // Choices 1 and 2 held the prompt's first block with choice 0 and started from copies of its
  // partial second block (positions 4, 5), carried by the step after the prompt's: no step
  // computed a prompt position again, and all three decoded their first token at position 6.
  int from_zero = 0, first_decodes = 0;
  size_t copies = 0;
  for (const auto& bytes : fake.model.steps) {
    auto b = StepBatch::Deserialize(bytes);
    ASSERT_TRUE(b.ok());
    for (const auto& c : b->seqs) {
      from_zero += c.start_pos == 0 ? 1 : 0;
      if (c.start_pos == 6 && c.tokens.size() == 1) ++first_decodes;
    }
    copies += b->block_copies.size();
  }
  EXPECT_EQ(from_zero, 1);
  EXPECT_EQ(first_decodes, 3);
  EXPECT_EQ(copies, 2u);
}

// Choices that end at their first token (max_tokens 1; eos) end at once, each with its own
// final event, and leave no block behind.
TEST(EngineOutputsFakeModelTest, ChoicesThatEndAtTheirFirstToken) {
  FakeEngine fake(8, {7});
  ASSERT_NE(fake.engine, nullptr);
  const auto& engine = fake.engine;
  ChoicesSink one_token(4), eos(2);
  ASSERT_TRUE(engine->Submit(Request("one", {1, 2, 3, 4, 5}, 1, 4), one_token.Callback()).ok());
  GenerationRequest r = Request("eos", {1, 2, 3, 4, 5, 6}, 5, 2);  // the first token is 7, the eos
  r.params.ignore_eos = false;
  ASSERT_TRUE(engine->Submit(r, eos.Callback()).ok());
  ASSERT_TRUE(one_token.Wait() && eos.Wait());
  const ReceivedChoices a = one_token.Get(), b = eos.Get();
  ExpectNoProtocolErrors(a);
  ExpectNoProtocolErrors(b);
  for (const auto& c : a.choices) {
    EXPECT_EQ(c.tokens, (std::vector<int32_t>{6}));
    EXPECT_EQ(c.finish_reason, "length");
  }
  EXPECT_EQ(a.completion_tokens, 4);
  for (const auto& c : b.choices) {
    EXPECT_TRUE(c.tokens.empty());
    EXPECT_EQ(c.finish_reason, "stop");
  }
  EXPECT_EQ(b.completion_tokens, 2);  // the eos tokens were generated
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.running + s.waiting, 0);
}

TEST(EngineOutputsFakeModelTest, OutOfRangeSettingsAreRefused) {
  FakeEngine fake(8);
  ASSERT_NE(fake.engine, nullptr);
  const auto& engine = fake.engine;
  ChoicesSink sink(1);
  const std::vector<std::function<void(GenerationRequest&)>> bad = {
      [](GenerationRequest& r) { r.n = 0; },
      [](GenerationRequest& r) { r.n = kMaxChoices + 1; },
      [](GenerationRequest& r) { r.params.logprobs = kMaxLogprobs + 1; },
      [](GenerationRequest& r) { r.params.logprobs = -2; },
      [](GenerationRequest& r) { r.params.prompt_logprobs = kMaxLogprobs + 1; },
  };
  for (const auto& change : bad) {
    GenerationRequest r = Request("bad", {1, 2}, 2, 1);
    change(r);
    const absl::Status st = engine->Submit(r, sink.Callback());
    std::printf("refused: %s\n", st.ToString().c_str());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  }
}

// Cancelling a request of four choices ends each with "abort", the request once, and frees the
// blocks the choices shared.
TEST(EngineOutputsFakeModelTest, CancelEndsEveryChoiceAndFreesTheSharedBlocks) {
  FakeEngine fake(64);
  ASSERT_NE(fake.engine, nullptr);
  const auto& engine = fake.engine;
  ChoicesSink sink(4);
  GenerationCallback inner = sink.Callback();
  std::atomic<int> first_choice_tokens{0};
  // Steps stall once choice 0 has two tokens (the callback runs on the engine thread).
  GenerationCallback cb = [&](const GenerationEvent& ev) {
    inner(ev);
    if (ev.choice == 0 && (first_choice_tokens += static_cast<int>(ev.token_ids.size())) == 2) fake.model.Hold(true);
  };
  ASSERT_TRUE(engine->Submit(Request("four", std::vector<int32_t>(9, 5), 100, 4), cb).ok());
  ASSERT_TRUE(sink.WaitTokens(2));
  const int64_t used = engine->Stats().kv_blocks_used;
  // 11 positions each in blocks of 4: 3 blocks per choice, of which the prompt's 2 full ones shared.
  std::printf("4 choices of a 9-token prompt at 11 positions: %lld blocks in use\n", static_cast<long long>(used));
  EXPECT_EQ(used, 2 + 4 * 1);
  engine->Cancel("four");
  fake.model.Hold(false);
  ASSERT_TRUE(sink.Wait());
  const ReceivedChoices got = sink.Get();
  ExpectNoProtocolErrors(got);
  for (const auto& c : got.choices) {
    EXPECT_EQ(c.finish_reason, "abort");
    EXPECT_LT(c.tokens.size(), 100u);
  }
  EXPECT_EQ(engine->Stats().kv_blocks_used, 0);
}

// --- the cpu backend with qwen3moe-tiny (tests/engine/batching/engine_outputs_checks.h) ---

testing::OutputsBackend Cpu() {
  testing::OutputsBackend b;
  b.options.kv_tokens = 4096;
  b.options.max_model_len = 256;
  return b;
}

TEST(EngineOutputsGoldenTest, LogprobsAreTheModelsLogSoftmax) { testing::CheckLogprobsAreTheModelsLogSoftmax(Cpu()); }
TEST(EngineOutputsGoldenTest, ThreeGreedyChoicesAreWhatOneGives) {
  testing::CheckThreeGreedyChoicesAreWhatOneGives(Cpu());
}
TEST(EngineOutputsGoldenTest, SeededChoicesAreReproducibleAndDiffer) {
  testing::CheckSeededChoicesAreReproducibleAndDiffer(Cpu());
}

}  // namespace
}  // namespace tandem::engine
