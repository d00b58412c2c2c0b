// The checks of logprobs and n > 1 choices on a real backend with qwen3moe-tiny, shared by the
// cpu test (tests/engine/batching/llm_engine_outputs_test.cc) and the cuda one
// (tests/engine/cuda/cuda_llm_engine_outputs_test.cc): logprobs equal a log-softmax of the same
// backend's own logits, greedy choices equal n = 1, seeded choice i equals n = 1 with seed + i.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/batching/llm_engine.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/batching/engine_on_ranks.h"
#include "tests/engine/batching/llm_engine_test_util.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine::testing {

// log_softmax(row)[token], the plain way in long double.
inline double RefLogprob(const float* row, int64_t vocab, int32_t token) {
  long double mx = row[0], sum = 0;
  for (int64_t i = 0; i < vocab; ++i) mx = std::max<long double>(mx, row[i]);
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<long double>(row[i]) - mx);
  return static_cast<double>(row[token] - mx - std::log(sum));
}

inline void ExpectNoProtocolErrors(const ReceivedChoices& r) {
  for (const auto& e : r.protocol_errors) ADD_FAILURE() << "event order: " << e;
}

// Greedy, eos ignored, n choices.
inline GenerationRequest ChoicesRequest(std::string id, std::vector<int32_t> prompt, int max_tokens, int n) {
  GenerationRequest r = Greedy(std::move(id), std::move(prompt), max_tokens);
  r.params.ignore_eos = true;
  r.n = n;
  return r;
}

// Where the checks run: the engine's options (backend included), how close a reported logprob
// must be to the reference prefill's (the cpu backend computes both the same way; the cuda one
// may take other product paths for a long prefill), and whether greedy tokens must be the golden.
struct OutputsBackend {
  EngineOptions options;
  double tolerance = 1e-4;
  bool greedy_is_golden = true;
};

inline std::vector<GoldenPrompt> Golden() {
  auto g = LoadGolden(TinyModelDir());
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : std::vector<GoldenPrompt>{};
}

inline void WithTinyEngine(const EngineOptions& o, const std::function<void(LLMEngine&)>& body) {
  WithEngineOn(TinyModelDir(), 1, o, nullptr, body);
}

// The model's logits at every position of `ids`, from a model of the test's own on `backend`.
inline Logits ReferenceLogits(const std::string& backend, const std::vector<int32_t>& ids) {
  ModelLoadOptions lo;
  lo.backend = backend;
  lo.threads = 1;
  auto model = Model::Load(testing::TinyModelDir(), lo);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  StepDriver driver(model->get(), nullptr);
  auto logits = PromptLogits(driver, ids);
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : Logits{};
}

inline void ExpectLogprobsOfRows(const std::vector<TokenLogprob>& got, const Logits& ref, int64_t first_row, int top,
                                 double tolerance, const char* what) {
  for (size_t i = 0; i < got.size(); ++i) {
    const float* row = ref.row(first_row + static_cast<int64_t>(i));
    EXPECT_NEAR(got[i].logprob, RefLogprob(row, ref.vocab, got[i].token), tolerance) << what << " " << i;
    ASSERT_EQ(got[i].top.size(), static_cast<size_t>(top)) << what << " " << i;
    for (size_t k = 0; k < got[i].top.size(); ++k) {
      EXPECT_NEAR(got[i].top[k].second, RefLogprob(row, ref.vocab, got[i].top[k].first), tolerance) << what << " " << i;
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
inline void CheckLogprobsAreTheModelsLogSoftmax(const OutputsBackend& b) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  const GoldenPrompt& g = golden[1];
  ReceivedChoices greedy, sampled;
  WithTinyEngine(b.options, [&](LLMEngine& e) {
    GenerationRequest r = ChoicesRequest("lp", g.ids, 8, 1);
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
  if (b.greedy_is_golden) {
    ASSERT_EQ(gc.tokens, std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 8));
  }
  ASSERT_EQ(gc.logprobs.size(), 8u);
  for (const auto& lp : gc.logprobs) EXPECT_EQ(lp.top[0].first, lp.token);  // greedy: the best one
  const int64_t P = static_cast<int64_t>(g.ids.size());
  std::vector<int32_t> seq = g.ids;
  seq.insert(seq.end(), gc.tokens.begin(), gc.tokens.end());
  const Logits ref = ReferenceLogits(b.options.backend, seq);
  ASSERT_EQ(ref.rows(), static_cast<int64_t>(seq.size()));
  ExpectLogprobsOfRows(gc.logprobs, ref, P - 1, 5, b.tolerance, "greedy");
  ASSERT_EQ(greedy.prompt_logprobs.size(), static_cast<size_t>(P - 1));
  for (int64_t i = 0; i + 1 < P; ++i) EXPECT_EQ(greedy.prompt_logprobs[i].token, g.ids[i + 1]);
  ExpectLogprobsOfRows(greedy.prompt_logprobs, ref, 0, 3, b.tolerance, "prompt");
  EXPECT_TRUE(sampled.prompt_logprobs.empty());
  const auto& sc = sampled.choices[0];
  std::vector<int32_t> sseq = g.ids;
  sseq.insert(sseq.end(), sc.tokens.begin(), sc.tokens.end());
  ExpectLogprobsOfRows(sc.logprobs, ReferenceLogits(b.options.backend, sseq), P - 1, 5, b.tolerance, "sampled");
}

// Each golden prompt alone (n = 1), then requests of three choices, one per prompt, all at once:
// each greedy choice is what n = 1 gave (choices recompute the prompt's partial block
// themselves), with blocks of 16 and with blocks of 4 in a pool so small that choices are
// preempted.
inline void CheckThreeGreedyChoicesAreWhatOneGives(const OutputsBackend& b) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  for (int32_t block_size : {16, 4}) {
    EngineOptions o = b.options;
    o.block_size = block_size;
    if (block_size == 4) o.kv_tokens = 96;  // 24 blocks for 9 sequences: preemptions
    WithTinyEngine(o, [&](LLMEngine& e) {
      std::vector<std::vector<int32_t>> alone;
      for (size_t i = 0; i < golden.size(); ++i) {
        ChoicesSink sink(1);
        ASSERT_TRUE(e.Submit(ChoicesRequest("a" + std::to_string(i), golden[i].ids, 16, 1), sink.Callback()).ok());
        ASSERT_TRUE(sink.Wait());
        alone.push_back(sink.Get().choices[0].tokens);
        if (b.greedy_is_golden) {
          EXPECT_EQ(alone.back(), golden[i].greedy) << "prompt " << i;
        }
      }
      std::vector<std::unique_ptr<ChoicesSink>> sinks;
      for (size_t i = 0; i < golden.size(); ++i) {
        sinks.push_back(std::make_unique<ChoicesSink>(3));
        const GenerationRequest r = ChoicesRequest("g" + std::to_string(i), golden[i].ids, 16, 3);
        ASSERT_TRUE(e.Submit(r, sinks.back()->Callback()).ok());
      }
      for (size_t i = 0; i < golden.size(); ++i) {
        ASSERT_TRUE(sinks[i]->Wait());
        const ReceivedChoices got = sinks[i]->Get();
        ExpectNoProtocolErrors(got);
        for (int c = 0; c < 3; ++c) EXPECT_EQ(got.choices[c].tokens, alone[i]) << "prompt " << i << " choice " << c;
        EXPECT_EQ(got.completion_tokens, 48);
        EXPECT_EQ(got.prompt_tokens, static_cast<int64_t>(golden[i].ids.size()));
      }
      const EngineStats s = e.Stats();
      std::printf("block size %d: 3 prompts x 3 greedy choices as n = 1; %lld preemptions; %lld blocks in use after\n",
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
inline void CheckSeededChoicesAreReproducibleAndDiffer(const OutputsBackend& b) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  WithTinyEngine(b.options, [&](LLMEngine& e) {
    auto run = [&](const std::string& id, uint64_t seed, int n) {
      GenerationRequest r = ChoicesRequest(id, golden[0].ids, 12, n);
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

}  // namespace tandem::engine::testing
