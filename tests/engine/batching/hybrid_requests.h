// The requests of the hybrid-model serving tests (cpu: llm_engine_hybrid_test; cuda:
// tests/engine/cuda/cuda_llm_engine_hybrid_test): the golden prompts, then pseudo-random prompts of
// mixed lengths, 16 in all, and a runner that submits them at once; and the check that the choices
// of an n > 1 request share their prompt's prefill.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/batching/llm_engine.h"
#include "tests/engine/batching/llm_engine_test_util.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine::testing {


// The golden prompts (16 greedy tokens each) first, then pseudo-random prompts of mixed lengths
// up to 150 tokens with 1..20 max_tokens, 16 requests in all.
struct Case {
  GenerationRequest request;
  std::vector<int32_t> golden;  // transformers' greedy tokens; empty for the random prompts
};

inline std::vector<Case> Cases(const std::string& model_dir) {
  auto golden = LoadGolden(model_dir);
  EXPECT_TRUE(golden.ok()) << golden.status();
  std::vector<Case> cases;
  auto add = [&](std::vector<int32_t> prompt, int32_t max_tokens, std::vector<int32_t> greedy) {
    Case c;
    c.request.request_id = "r" + std::to_string(cases.size());
    c.request.prompt_ids = std::move(prompt);
    c.request.params.temperature = 0.0f;
    c.request.params.max_tokens = max_tokens;
    c.request.params.ignore_eos = true;
    c.golden = std::move(greedy);
    cases.push_back(std::move(c));
  };
  if (golden.ok()) {
    for (const GoldenPrompt& g : *golden) add(g.ids, static_cast<int32_t>(g.greedy.size()), g.greedy);
  }
  const int lengths[] = {1, 150, 7, 33, 2, 90, 15, 64, 3, 120, 48, 5, 11, 75, 26, 140};
  uint32_t x = 12345;
  for (int i = 0; cases.size() < 16; ++i) {
    std::vector<int32_t> prompt(lengths[i]);
    for (int32_t& t : prompt) t = static_cast<int32_t>((x = x * 1664525u + 1013904223u) >> 8) % 4000;
    add(std::move(prompt), 1 + (i * 7) % 20, {});
  }
  return cases;
}

// Submits every case at once; the tokens of each, in case order.
inline std::vector<std::vector<int32_t>> RunAll(LLMEngine& e, const std::vector<Case>& cases, const char* label) {
  std::vector<std::unique_ptr<Sink>> sinks;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Case& c : cases) {
    sinks.push_back(std::make_unique<Sink>());
    EXPECT_TRUE(e.Submit(c.request, sinks.back()->Callback()).ok());
  }
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(sinks[i]->Wait(std::chrono::seconds(120)));
    const auto r = sinks[i]->Get();
    EXPECT_EQ(r.finish_reason, "length") << label << " " << cases[i].request.request_id << ": " << r.error;
    out.push_back(r.tokens);
  }
  const EngineStats s = e.Stats();
  std::printf("%s: %zu requests in %.3f s, %lld steps, %lld preemptions, %d state slots (%d used after)\n", label,
              cases.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              static_cast<long long>(s.iterations), static_cast<long long>(s.preemptions), s.state_slots_total,
              s.state_slots_used);
  EXPECT_EQ(s.state_slots_used, 0) << label;
  EXPECT_EQ(s.kv_blocks_used, 0) << label;
  return out;
}

// Counts the prompt tokens the engine's steps compute (StepMetrics::prefill_tokens).
struct PrefillCounter {
  std::atomic<int64_t> tokens{0};
  void Attach(EngineOptions& o) {
    o.on_step = [this](const StepMetrics& m) { tokens += m.prefill_tokens; };
  }
};

// Runs one request alone: its choices' tokens (each must end at max_tokens), and in `prefill` the
// prompt tokens the steps computed meanwhile.
inline std::vector<std::vector<int32_t>> RunRequest(LLMEngine& e, const GenerationRequest& r, PrefillCounter& counter,
                                                    int64_t* prefill) {
  const int64_t before = counter.tokens.load();
  ChoicesSink sink(r.n);
  EXPECT_TRUE(e.Submit(r, sink.Callback()).ok());
  EXPECT_TRUE(sink.Wait());
  const auto got = sink.Get();
  EXPECT_TRUE(got.protocol_errors.empty()) << r.request_id;
  std::vector<std::vector<int32_t>> out;
  for (const auto& c : got.choices) {
    EXPECT_EQ(c.finish_reason, "length") << r.request_id;
    out.push_back(c.tokens);
  }
  *prefill = counter.tokens.load() - before;
  return out;
}

// Two prompts whose forks copy a partial block (blocks of 16) with the state slot: one shorter
// than a block, one over 128 tokens (a prefill chunked over several steps).
inline std::vector<GenerationRequest> ForkPrompts(const std::vector<Case>& cases) {
  std::vector<GenerationRequest> out;
  for (bool long_one : {false, true}) {
    for (const Case& c : cases) {
      const size_t n = c.request.prompt_ids.size();
      if (n % 16 != 0 && (long_one ? n > 128 : n < 16)) {
        out.push_back(c.request);
        break;
      }
    }
  }
  return out;
}

// An n = 4 request computes its prompt once (not once per choice); greedy, each choice gives what
// n = 1 gives; sampled with a seed, choice i gives what n = 1 gives with seed + i (its first token
// is drawn from the same prompt logits with the same generator, the rest from its own steps).
inline void CheckChoicesShareThePrefill(LLMEngine& e, GenerationRequest r, PrefillCounter& counter,
                                        const std::string& label) {
  const int64_t prompt = static_cast<int64_t>(r.prompt_ids.size());
  r.params.max_tokens = 8;
  int64_t prefill = 0;
  const auto alone = RunRequest(e, r, counter, &prefill);
  EXPECT_EQ(prefill, prompt) << label;
  r.n = 4;
  const auto greedy = RunRequest(e, r, counter, &prefill);
  std::printf("%s: prompt of %lld tokens, n = 4 computed %lld prompt tokens\n", label.c_str(),
              static_cast<long long>(prompt), static_cast<long long>(prefill));
  EXPECT_EQ(prefill, prompt) << label << ": the prompt is computed once for the 4 choices";
  for (size_t c = 0; c < greedy.size(); ++c) {
    EXPECT_EQ(greedy[c], alone[0]) << label << ": greedy, prompt " << prompt << ", choice " << c;
  }
  r.params.temperature = 1.0f;
  r.params.seed = 1234;
  const auto sampled = RunRequest(e, r, counter, &prefill);
  EXPECT_EQ(prefill, prompt) << label;
  for (size_t c = 0; c < sampled.size(); ++c) {
    GenerationRequest one = r;
    one.n = 1;
    one.params.seed = 1234 + c;
    EXPECT_EQ(sampled[c], RunRequest(e, one, counter, &prefill)[0])
        << label << ": seeded, prompt " << prompt << ", choice " << c;
  }
  EXPECT_NE(sampled[0], sampled[1]) << label << ": two choices drew the same tokens";
  EXPECT_EQ(e.Stats().state_slots_used, 0) << label;
  EXPECT_EQ(e.Stats().kv_blocks_used, 0) << label;
}

}  // namespace tandem::engine::testing
