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
#include "tests/engine/batching/engine_on_ranks.h"
#include "tests/engine/batching/llm_engine_test_util.h"
#include "tests/engine/cpu/golden.h"
#include "tests/engine/fake_model.h"

namespace tandem::engine {
namespace {

using testing::ChoicesSink;
using testing::FakeModel;
using testing::GoldenPrompt;
using testing::ReceivedChoices;

// log_softmax(row)[token], the plain way in long double.
double RefLogprob(const float* row, int64_t vocab, int32_t token) {
  long double mx = row[0], sum = 0;
  for (int64_t i = 0; i < vocab; ++i) mx = std::max<long double>(mx, row[i]);
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<long double>(row[i]) - mx);
  return static_cast<double>(row[token] - mx - std::log(sum));
}

void ExpectNoProtocolErrors(const ReceivedChoices& r) {
  for (const auto& e : r.protocol_errors) ADD_FAILURE() << "event order: " << e;
}

// Greedy, eos ignored, n choices.
GenerationRequest Request(std::string id, std::vector<int32_t> prompt, int max_tokens, int n) {
  GenerationRequest r = testing::Greedy(std::move(id), std::move(prompt), max_tokens);
  r.params.ignore_eos = true;
  r.n = n;
  return r;
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
  // Choices 1 and 2 held the prompt's first block with choice 0 and recomputed only positions
  // 4, 5 and their first token: no step ever prefilled the prompt from position 0 again.
  int from_zero = 0, forks = 0;
  for (const auto& bytes : fake.model.steps) {
    auto b = StepBatch::Deserialize(bytes);
    ASSERT_TRUE(b.ok());
    for (const auto& c : b->seqs) {
      from_zero += c.start_pos == 0 ? 1 : 0;
      if (c.start_pos == 4 && c.tokens.size() == 3) ++forks;
    }
  }
  EXPECT_EQ(from_zero, 1);
  EXPECT_EQ(forks, 2);
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

// --- the cpu backend with qwen3moe-tiny ---

std::vector<GoldenPrompt> Golden() {
  auto g = testing::LoadGolden(testing::TinyModelDir());
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : std::vector<GoldenPrompt>{};
}

EngineOptions TinyOptions() {
  EngineOptions o;
  o.kv_tokens = 4096;
  o.max_model_len = 256;
  return o;
}

void WithTinyEngine(const EngineOptions& o, const std::function<void(LLMEngine&)>& body) {
  testing::WithEngineOn(testing::TinyModelDir(), 1, o, nullptr, body);
}

// The model's logits at every position of `ids`, from a model of the test's own.
Logits ReferenceLogits(const std::vector<int32_t>& ids) {
  ModelLoadOptions lo;
  lo.threads = 1;
  auto model = Model::Load(testing::TinyModelDir(), lo);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  StepDriver driver(model->get(), nullptr);
  auto logits = PromptLogits(driver, ids);
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : Logits{};
}

void ExpectLogprobsOfRows(const std::vector<TokenLogprob>& got, const Logits& ref, int64_t first_row, int top,
                          const char* what) {
  for (size_t i = 0; i < got.size(); ++i) {
    const float* row = ref.row(first_row + static_cast<int64_t>(i));
    EXPECT_NEAR(got[i].logprob, RefLogprob(row, ref.vocab, got[i].token), 1e-4) << what << " " << i;
    ASSERT_EQ(got[i].top.size(), static_cast<size_t>(top)) << what << " " << i;
    for (size_t k = 0; k < got[i].top.size(); ++k) {
      EXPECT_NEAR(got[i].top[k].second, RefLogprob(row, ref.vocab, got[i].top[k].first), 1e-4) << what << " " << i;
      if (k > 0) {
        EXPECT_GE(got[i].top[k - 1].second, got[i].top[k].second) << what << " " << i;
      }
    }
    if (i < 3) {
      std::printf("%s %zu: token %d logprob %.5f (reference %.5f), best %d at %.5f\n", what, i, got[i].token,
                  got[i].logprob, RefLogprob(row, ref.vocab, got[i].token), got[i].top[0].first, got[i].top[0].second);
    }
  }
}

// Greedy and sampled (temperature 0.5: the reported numbers stay the model's raw distribution).
TEST(EngineOutputsGoldenTest, LogprobsAreTheModelsLogSoftmax) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  const GoldenPrompt& g = golden[1];
  ReceivedChoices greedy, sampled;
  WithTinyEngine(TinyOptions(), [&](LLMEngine& e) {
    GenerationRequest r = Request("lp", g.ids, 8, 1);
    r.params.logprobs = 5;
    r.params.prompt_logprobs = 3;
    ChoicesSink s1(1), s2(1);
    ASSERT_TRUE(e.Submit(r, s1.Callback()).ok());
    r.request_id = "lp-sampled";
    r.params.temperature = 0.5f;
    r.params.seed = 3;
    r.params.prompt_logprobs = -1;
    ASSERT_TRUE(e.Submit(r, s2.Callback()).ok());
    ASSERT_TRUE(s1.Wait() && s2.Wait());
    greedy = s1.Get();
    sampled = s2.Get();
  });
  ExpectNoProtocolErrors(greedy);
  ExpectNoProtocolErrors(sampled);
  const auto& gc = greedy.choices[0];
  ASSERT_EQ(gc.tokens, std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 8));
  ASSERT_EQ(gc.logprobs.size(), 8u);
  for (const auto& lp : gc.logprobs) EXPECT_EQ(lp.top[0].first, lp.token);  // greedy: the best one
  const int64_t P = static_cast<int64_t>(g.ids.size());
  std::vector<int32_t> seq = g.ids;
  seq.insert(seq.end(), gc.tokens.begin(), gc.tokens.end());
  const Logits ref = ReferenceLogits(seq);
  ASSERT_EQ(ref.rows(), static_cast<int64_t>(seq.size()));
  ExpectLogprobsOfRows(gc.logprobs, ref, P - 1, 5, "greedy");
  ASSERT_EQ(greedy.prompt_logprobs.size(), static_cast<size_t>(P - 1));
  for (int64_t i = 0; i + 1 < P; ++i) EXPECT_EQ(greedy.prompt_logprobs[i].token, g.ids[i + 1]);
  ExpectLogprobsOfRows(greedy.prompt_logprobs, ref, 0, 3, "prompt");
  EXPECT_TRUE(sampled.prompt_logprobs.empty());
  const auto& sc = sampled.choices[0];
  std::vector<int32_t> sseq = g.ids;
  sseq.insert(sseq.end(), sc.tokens.begin(), sc.tokens.end());
  ExpectLogprobsOfRows(sc.logprobs, ReferenceLogits(sseq), P - 1, 5, "sampled");
}

// Requests of three choices, one per golden prompt, all at once: each greedy choice is the
// golden continuation, as n = 1 gives (choices recompute the prompt's partial block themselves).
TEST(EngineOutputsGoldenTest, ThreeGreedyChoicesAreWhatOneGives) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  for (int32_t block_size : {16, 4}) {
    EngineOptions o = TinyOptions();
    o.block_size = block_size;
    if (block_size == 4) o.kv_tokens = 96;  // 24 blocks for 9 sequences: preemptions
    WithTinyEngine(o, [&](LLMEngine& e) {
      std::vector<std::unique_ptr<ChoicesSink>> sinks;
      for (size_t i = 0; i < golden.size(); ++i) {
        sinks.push_back(std::make_unique<ChoicesSink>(3));
        GenerationRequest r = Request("g" + std::to_string(i), golden[i].ids, 16, 3);
        ASSERT_TRUE(e.Submit(r, sinks.back()->Callback()).ok());
      }
      for (size_t i = 0; i < golden.size(); ++i) {
        ASSERT_TRUE(sinks[i]->Wait());
        const ReceivedChoices got = sinks[i]->Get();
        ExpectNoProtocolErrors(got);
        for (int c = 0; c < 3; ++c) {
          EXPECT_EQ(got.choices[c].tokens, golden[i].greedy) << "prompt " << i << " choice " << c;
        }
        EXPECT_EQ(got.completion_tokens, 48);
        EXPECT_EQ(got.prompt_tokens, static_cast<int64_t>(golden[i].ids.size()));
      }
      const EngineStats s = e.Stats();
      std::printf("block size %d: 3 prompts x 3 greedy choices golden; %lld preemptions; %lld blocks in use after\n",
                  block_size, static_cast<long long>(s.preemptions), static_cast<long long>(s.kv_blocks_used));
      EXPECT_EQ(s.kv_blocks_used, 0);
      if (block_size == 4) {
        EXPECT_GT(s.preemptions, 0);
      }
    });
  }
}

// n = 3 with seed 7: choice i is the n = 1 request with seed 7 + i, the same on a second run, and
// the choices differ.
TEST(EngineOutputsGoldenTest, SeededChoicesAreReproducibleAndDiffer) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  WithTinyEngine(TinyOptions(), [&](LLMEngine& e) {
    auto run = [&](const std::string& id, uint64_t seed, int n) {
      GenerationRequest r = Request(id, golden[0].ids, 12, n);
      r.params.temperature = 1.0f;
      r.params.seed = seed;
      ChoicesSink sink(n);
      EXPECT_TRUE(e.Submit(r, sink.Callback()).ok());
      EXPECT_TRUE(sink.Wait());
      const ReceivedChoices got = sink.Get();
      ExpectNoProtocolErrors(got);
      std::vector<std::vector<int32_t>> out;
      for (const auto& c : got.choices) out.push_back(c.tokens);
      return out;
    };
    const auto first = run("a", 7, 3);
    const auto again = run("b", 7, 3);
    EXPECT_EQ(first, again);
    for (int i = 0; i < 3; ++i) {
      const auto alone = run("alone" + std::to_string(i), 7 + i, 1);
      EXPECT_EQ(first[i], alone[0]) << "choice " << i;
      EXPECT_EQ(first[i].size(), 12u);
    }
    EXPECT_NE(first[0], first[1]);
    EXPECT_NE(first[1], first[2]);
    EXPECT_NE(first[0], first[2]);
    EXPECT_EQ(e.Stats().kv_blocks_used, 0);
  });
}

}  // namespace
}  // namespace tandem::engine
