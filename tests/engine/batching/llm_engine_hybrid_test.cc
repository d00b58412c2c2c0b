// Serving the hybrid models (Gated DeltaNet layers with a state slot per running sequence) on the
// real cpu backend, qwen35moe-tiny and qwen3next-tiny at TP 1 and 2 (threads): 16 concurrent
// greedy requests of mixed prompt lengths (1..150 tokens) and max_tokens give exactly the tokens
// each gives alone (and the golden prompts transformers' tokens), when 4 slots are reused by 16
// requests, when a small KV pool forces preemption (the victim's slot goes to another sequence,
// the victim recomputes from position 0 in a new one), and after a cancelled request frees its
// slot for the next; n = 3 requests, whose choices start from copies of the prompt's state slot
// and partial KV block. n = 4 requests compute their prompt once (the steps' prefill tokens), give
// n = 1's tokens in every choice (greedy), choice i the tokens of n = 1 with seed + i (sampled), and
// the same when the pool has no block for the copies (the choices recompute the prompt).
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/batching/llm_engine.h"
#include "tests/engine/batching/engine_on_ranks.h"
#include "tests/engine/batching/hybrid_requests.h"
#include "tests/engine/batching/llm_engine_test_util.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine {
namespace {

using testing::Case;
using testing::Cases;
using testing::RunAll;
using testing::Sink;

class EngineHybridTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  std::string dir() const { return testing::TestdataDir() + "/" + std::get<0>(GetParam()); }
  int tp() const { return std::get<1>(GetParam()); }
  static EngineOptions Options(int32_t max_num_seqs, int64_t kv_tokens) {
    EngineOptions o;
    o.max_num_seqs = max_num_seqs;
    o.kv_tokens = kv_tokens;
    o.max_model_len = 256;
    o.max_num_batched_tokens = 64;  // the long prompts are chunked, beside other sequences' decodes
    return o;
  }
};

TEST_P(EngineHybridTest, SixteenConcurrentGiveWhatEachGivesAlone) {
  const std::vector<Case> cases = Cases(dir());
  ASSERT_EQ(cases.size(), 16u);
  // One state slot: every request runs alone, and each takes the slot the previous one freed.
  std::vector<std::vector<int32_t>> alone;
  testing::WithEngineOn(dir(), tp(), Options(1, 4096), nullptr, [&](LLMEngine& e) {
    EXPECT_EQ(e.Stats().state_slots_total, 1);
    alone = RunAll(e, cases, "alone (1 slot)");
    // A cancelled request gives its slot to the one queued behind it, which starts clean.
    Sink cancelled, next;
    GenerationRequest long_one = cases[1].request;
    long_one.request_id = "cancelled";
    long_one.params.max_tokens = 100;
    ASSERT_TRUE(e.Submit(long_one, cancelled.Callback()).ok());
    ASSERT_TRUE(e.Submit(cases[3].request, next.Callback()).ok());
    ASSERT_TRUE(cancelled.WaitTokens(2));
    e.Cancel("cancelled");
    ASSERT_TRUE(cancelled.Wait() && next.Wait());
    EXPECT_EQ(cancelled.Get().finish_reason, "abort");
    EXPECT_EQ(next.Get().tokens, alone[3]) << "the request after a cancelled one";
  });
  ASSERT_EQ(alone.size(), cases.size());
  int golden = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].golden.empty()) continue;
    EXPECT_EQ(alone[i], cases[i].golden) << "golden prompt " << i;
    ++golden;
  }
  EXPECT_GE(golden, 3);

  // 4 slots for 16 requests: finished requests' slots are taken by new ones mid-flight.
  testing::WithEngineOn(dir(), tp(), Options(4, 4096), nullptr, [&](LLMEngine& e) {
    EXPECT_EQ(e.Stats().state_slots_total, 4);
    const auto got = RunAll(e, cases, "16 on 4 slots");
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "4 slots, request " << i;
    // n = 3 (choices 1 and 2 start from copies of the prompt's slot in slots of their own, two
    // requests' choices waiting for slots and then prefilling again) gives n = 1's tokens in every
    // choice; then a cancelled n = 3 request gives every slot and block back.
    std::vector<std::unique_ptr<testing::ChoicesSink>> sinks;
    for (size_t i : {0, 1}) {
      GenerationRequest r = cases[i].request;
      r.request_id = "n3-" + std::to_string(i);
      r.n = 3;
      sinks.push_back(std::make_unique<testing::ChoicesSink>(3));
      ASSERT_TRUE(e.Submit(r, sinks.back()->Callback()).ok());
    }
    for (size_t i : {0, 1}) {
      ASSERT_TRUE(sinks[i]->Wait());
      const auto choices = sinks[i]->Get();
      EXPECT_TRUE(choices.protocol_errors.empty());
      for (int c = 0; c < 3; ++c) EXPECT_EQ(choices.choices[c].tokens, alone[i]) << "n = 3, request " << i << " choice " << c;
    }
    GenerationRequest r = cases[1].request;
    r.request_id = "n3-cancelled";
    r.n = 3;
    r.params.max_tokens = 100;
    testing::ChoicesSink cancelled(3);
    ASSERT_TRUE(e.Submit(r, cancelled.Callback()).ok());
    ASSERT_TRUE(cancelled.WaitTokens(2));
    e.Cancel("n3-cancelled");
    ASSERT_TRUE(cancelled.Wait());
    for (const auto& c : cancelled.Get().choices) EXPECT_EQ(c.finish_reason, "abort");
    EXPECT_EQ(e.Stats().state_slots_used, 0);
    EXPECT_EQ(e.Stats().kv_blocks_used, 0);
  });

  // 16 slots but 192 KV tokens (the longest request alone needs 170): preemption.
  testing::WithEngineOn(dir(), tp(), Options(16, 192), nullptr, [&](LLMEngine& e) {
    const auto got = RunAll(e, cases, "16 on 192 KV tokens");
    EXPECT_GT(e.Stats().preemptions, 0);
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "tiny KV pool, request " << i;
  });
}

TEST_P(EngineHybridTest, ChoicesStartFromThePromptsStateAndDrawAsOneChoiceRequests) {
  const std::vector<GenerationRequest> requests = testing::ForkPrompts(Cases(dir()));
  ASSERT_EQ(requests.size(), 2u);
  testing::PrefillCounter counter;
  EngineOptions o = Options(4, 4096);
  counter.Attach(o);
  testing::WithEngineOn(dir(), tp(), o, nullptr, [&](LLMEngine& e) {
    const std::string label = "cpu " + std::get<0>(GetParam()) + " tp" + std::to_string(tp());
    for (const GenerationRequest& r : requests) testing::CheckChoicesShareThePrefill(e, r, counter, label);
  });

  // A pool of 3 blocks (48 tokens) holds a 40-token prompt and its 8 tokens and nothing else: the
  // forks find no block for their copies, so they fall back to prefilling the prompt again, one
  // after the other once the parent is done, and still give n = 1's tokens.
  o = Options(4, 48);
  counter.Attach(o);
  testing::WithEngineOn(dir(), tp(), o, nullptr, [&](LLMEngine& e) {
    GenerationRequest r = requests[1];
    r.prompt_ids.resize(40);
    r.params.max_tokens = 8;
    int64_t prefill = 0;
    const auto alone = testing::RunRequest(e, r, counter, &prefill);
    r.n = 4;
    const auto got = testing::RunRequest(e, r, counter, &prefill);
    EXPECT_EQ(prefill, 40 + 3 * 41) << "the forks recompute their prompt and first token";
    EXPECT_GT(e.Stats().preemptions, 0);
    for (int c = 0; c < 4; ++c) EXPECT_EQ(got[c], alone[0]) << "no block for the copies, choice " << c;
    EXPECT_EQ(e.Stats().state_slots_used, 0);
    EXPECT_EQ(e.Stats().kv_blocks_used, 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Models, EngineHybridTest,
                         ::testing::Combine(::testing::Values("qwen35moe-tiny", "qwen3next-tiny"),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param));
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace tandem::engine
