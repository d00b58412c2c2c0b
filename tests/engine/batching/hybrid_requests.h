// The requests of the hybrid-model serving tests (cpu: llm_engine_hybrid_test; cuda:
// tests/engine/cuda/cuda_llm_engine_hybrid_test): the golden prompts, then pseudo-random prompts of
// mixed lengths, 16 in all, and a runner that submits them at once.
#pragma once

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

}  // namespace tandem::engine::testing
