// Serving the hybrid models on the cuda backend: the LLMEngine sizes its KV pool and state slots
// from device memory (no kv_tokens), and 16 concurrent greedy requests on 4 reused state slots give
// exactly the tokens each gives alone (one slot), the golden prompts transformers' tokens. Steps are
// kept to 32 tokens (max_num_batched_tokens), the decode-sized path whose products keep float32
// inputs, so a token's numbers do not depend on which other sequences share its step. n = 4
// requests (TP 1 and 2) compute their prompt once and give n = 1's tokens in every choice (greedy)
// or, sampled, n = 1's with seed + i in choice i; the copies a fork starts from (KV block of every
// attention layer, every DeltaNet layer's state slot; f32, bf16 and fp8 KV) make its decode the
// parent's (fork_copy_check.h).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/batching/llm_engine.h"
#include "engine/model.h"
#include "tests/common/test_util.h"
#include "tests/engine/batching/engine_on_ranks.h"
#include "tests/engine/batching/hybrid_requests.h"
#include "tests/engine/cpu/fork_copy_check.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::engine {
namespace {

EngineOptions Options(int32_t max_num_seqs) {
  EngineOptions o;
  o.backend = "cuda";
  o.max_num_seqs = max_num_seqs;
  o.max_model_len = 256;
  o.max_num_batched_tokens = 32;
  return o;
}

class cuda_llm_engine_hybrid : public ::testing::TestWithParam<std::string> {};

TEST_P(cuda_llm_engine_hybrid, SixteenConcurrentOnDeviceSizedSlotsGiveWhatEachGivesAlone) {
  SKIP_WITHOUT_GPU();
  const std::string dir = testing::TestdataDir() + "/" + GetParam();
  const std::vector<testing::Case> cases = testing::Cases(dir);
  ASSERT_EQ(cases.size(), 16u);
  std::vector<std::vector<int32_t>> alone;
  testing::WithEngineOn(dir, 1, Options(1), nullptr, [&](LLMEngine& e) {
    const EngineStats s = e.Stats();
    std::printf("cuda %s: KV pool %lld tokens, %d state slots, sized from device memory\n", GetParam().c_str(),
                static_cast<long long>(s.kv_tokens_total), s.state_slots_total);
    EXPECT_EQ(s.state_slots_total, 1);
    EXPECT_GT(s.kv_tokens_total, 0);
    alone = testing::RunAll(e, cases, "cuda alone (1 slot)");
  });
  ASSERT_EQ(alone.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].golden.empty()) {  // braces: EXPECT_EQ expands to an if/else
      EXPECT_EQ(alone[i], cases[i].golden) << "golden prompt " << i;
    }
  }
  testing::WithEngineOn(dir, 1, Options(4), nullptr, [&](LLMEngine& e) {
    EXPECT_EQ(e.Stats().state_slots_total, 4);
    const auto got = testing::RunAll(e, cases, "cuda 16 on 4 slots");
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "4 slots, request " << i;
  });
}

TEST_P(cuda_llm_engine_hybrid, ChoicesStartFromThePromptsStateAndDrawAsOneChoiceRequests) {
  SKIP_WITHOUT_GPU();
  const std::string dir = testing::TestdataDir() + "/" + GetParam();
  const std::vector<GenerationRequest> requests = testing::ForkPrompts(testing::Cases(dir));
  ASSERT_EQ(requests.size(), 2u);
  for (int tp : {1, 2}) {
    testing::PrefillCounter counter;
    EngineOptions o = Options(4);
    // Both ranks share the one GPU here: a pool sized from device memory would be taken twice.
    o.kv_tokens = 4096;
    counter.Attach(o);
    testing::WithEngineOn(dir, tp, o, nullptr, [&](LLMEngine& e) {
      for (const GenerationRequest& r : requests) {
        testing::CheckChoicesShareThePrefill(e, r, counter, "cuda " + GetParam() + " tp" + std::to_string(tp));
      }
    });
  }
  for (const char* dtype : {"f32", "bf16", "fp8"}) {
    ModelLoadOptions mo;
    mo.backend = "cuda";
    mo.kv_cache_dtype = dtype;
    auto model = Model::Load(dir, mo);
    ASSERT_TRUE(model.ok()) << model.status();
    // Decode steps of one sequence take the same kernels in the same order; the margin is for
    // any reduction whose order is not fixed (a missed copy moves the logits by ~0.3).
    testing::CheckForkCopies(**model, "cuda " + GetParam() + " kv=" + dtype, /*tolerance=*/1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, cuda_llm_engine_hybrid, ::testing::Values("qwen35moe-tiny", "qwen3next-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace tandem::engine
