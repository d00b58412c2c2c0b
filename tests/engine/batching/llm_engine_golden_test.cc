// The LLMEngine on the real cpu backend with qwen3moe-tiny, against the transformers golden
// (16 greedy tokens for each of three prompts): alone, 16 concurrent requests mixed with sampled
// ones, a tiny KV pool that forces preemption, chunked prefill, TP = 2 as threads; plus seeds,
// cancellation and stop strings through the real Qwen3 tokenizer.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/batching/llm_engine.h"
#include "engine/batching/timed_comm.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/batching/engine_on_ranks.h"
#include "tests/engine/batching/llm_engine_test_util.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine {
namespace {

using testing::GoldenPrompt;
using testing::Sink;

std::vector<GoldenPrompt> Golden() {
  auto g = testing::LoadGolden(testing::TinyModelDir());
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : std::vector<GoldenPrompt>{};
}

// The tiny model on `tp` ranks (tests/engine/batching/engine_on_ranks.h); with TP, rank 0 counts
// its all-reduces.
void WithEngine(int tp, const EngineOptions& options, const tokenizer::Tokenizer* tok,
                const std::function<void(LLMEngine&)>& body) {
  testing::WithEngineOn(testing::TinyModelDir(), tp, options, tok, body, [tp](const TimedComm& timed, int64_t steps) {
    if (tp == 1) return;
    // Two all-reduces per layer per step (o_proj, experts); 4 layers.
    std::printf("rank 0: %lld all-reduces in %.3f s over %lld steps\n",
                static_cast<long long>(timed.all_reduce_count()), timed.all_reduce_seconds(),
                static_cast<long long>(steps));
    EXPECT_EQ(timed.all_reduce_count(), 2 * 4 * steps);
    EXPECT_GT(timed.all_reduce_seconds(), 0.0);
  });
}

GenerationRequest GreedyRequest(const std::string& id, const GoldenPrompt& g) {
  GenerationRequest r;
  r.request_id = id;
  r.prompt_ids = g.ids;
  r.params.temperature = 0.0f;
  r.params.max_tokens = static_cast<int32_t>(g.greedy.size());
  r.params.ignore_eos = true;
  return r;
}

GenerationRequest SampledRequest(const std::string& id, const GoldenPrompt& g, uint64_t seed, int max_tokens = 16) {
  GenerationRequest r;
  r.request_id = id;
  r.prompt_ids = g.ids;
  r.params.temperature = 1.0f;
  r.params.seed = seed;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

std::string Ids(const std::vector<int32_t>& v, size_t n = 6) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < n; ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s + (v.size() > n ? " ..." : "");
}

// Submits the three golden prompts (each `copies` times) plus `sampled` seeded requests at once;
// checks every greedy result against the golden. Returns the sampled tokens by request.
std::vector<std::vector<int32_t>> RunGoldenMix(LLMEngine& e, const std::vector<GoldenPrompt>& golden, int copies,
                                               int sampled, const char* label) {
  struct Item {
    int prompt;
    bool greedy;
    std::unique_ptr<Sink> sink;
  };
  std::vector<Item> items;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < copies * 3 + sampled; ++i) {
    Item it{i % 3, i < copies * 3, std::make_unique<Sink>()};
    const std::string id = std::string(label) + "-" + std::to_string(i);
    GenerationRequest r = it.greedy ? GreedyRequest(id, golden[it.prompt])
                                    : SampledRequest(id, golden[it.prompt], 1000 + i);
    EXPECT_TRUE(e.Submit(r, it.sink->Callback()).ok());
    items.push_back(std::move(it));
  }
  std::vector<std::vector<int32_t>> sampled_tokens;
  int identical = 0, greedy = 0;
  for (auto& it : items) {
    EXPECT_TRUE(it.sink->Wait(std::chrono::seconds(120)));
    const auto r = it.sink->Get();
    EXPECT_EQ(r.finish_reason, "length");
    if (it.greedy) {
      ++greedy;
      EXPECT_EQ(r.tokens, golden[it.prompt].greedy) << label << " prompt" << it.prompt;
      identical += r.tokens == golden[it.prompt].greedy ? 1 : 0;
    } else {
      EXPECT_EQ(r.tokens.size(), 16u);
      sampled_tokens.push_back(r.tokens);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %zu requests x 16 tokens in %.3f s = %.0f output tokens/s (informational)\n", label,
              items.size(), secs, items.size() * 16 / secs);
  const EngineStats s = e.Stats();
  std::printf("%s: %d/%d greedy requests identical to golden (%d sampled alongside); iterations %lld, "
              "preemptions %lld, kv blocks used %lld of %lld\n",
              label, identical, greedy, sampled, static_cast<long long>(s.iterations),
              static_cast<long long>(s.preemptions), static_cast<long long>(s.kv_blocks_used),
              static_cast<long long>(s.kv_blocks_total));
  EXPECT_EQ(s.kv_blocks_used, 0);
  return sampled_tokens;
}

EngineOptions Options() {
  EngineOptions o;
  o.kv_tokens = 4096;
  o.max_model_len = 256;
  return o;
}

TEST(EngineGoldenTest, EachPromptAlone) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  WithEngine(1, Options(), nullptr, [&](LLMEngine& e) {
    for (size_t i = 0; i < golden.size(); ++i) {
      Sink sink;
      ASSERT_TRUE(e.Submit(GreedyRequest("p" + std::to_string(i), golden[i]), sink.Callback()).ok());
      ASSERT_TRUE(sink.Wait());
      const auto r = sink.Get();
      std::printf("prompt%zu (%zu tokens): got %s, golden %s\n", i, golden[i].ids.size(), Ids(r.tokens).c_str(),
                  Ids(golden[i].greedy).c_str());
      EXPECT_EQ(r.tokens, golden[i].greedy);
      EXPECT_EQ(r.finish_reason, "length");
      EXPECT_EQ(r.completion_tokens, 16);
    }
  });
}

TEST(EngineGoldenTest, SixteenConcurrentWithSampledOnes) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  WithEngine(1, Options(), nullptr, [&](LLMEngine& e) { RunGoldenMix(e, golden, 4, 4, "tp1 x16"); });
}

TEST(EngineGoldenTest, TinyKvPoolPreemptsAndStaysGolden) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  EngineOptions o = Options();
  o.block_size = 4;
  o.kv_tokens = 64;  // 16 blocks; prompt2 alone needs 13 of them for its 49 positions
  WithEngine(1, o, nullptr, [&](LLMEngine& e) {
    RunGoldenMix(e, golden, 2, 0, "kv 64 tokens");
    EXPECT_GT(e.Stats().preemptions, 0);
  });
}

TEST(EngineGoldenTest, ChunkedPrefillStaysGolden) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  EngineOptions o = Options();
  o.max_num_batched_tokens = 8;  // the 33-token prompt takes 5 steps
  WithEngine(1, o, nullptr, [&](LLMEngine& e) {
    Sink sink;
    ASSERT_TRUE(e.Submit(GreedyRequest("long", golden[2]), sink.Callback()).ok());
    ASSERT_TRUE(sink.Wait());
    EXPECT_EQ(sink.Get().tokens, golden[2].greedy);
    const int64_t iterations = e.Stats().iterations;
    std::printf("33-token prompt in chunks of 8: %lld steps for 16 tokens\n", static_cast<long long>(iterations));
    EXPECT_EQ(iterations, 5 + 15);
    RunGoldenMix(e, golden, 2, 2, "chunked x8");
  });
}

TEST(EngineGoldenTest, TensorParallelTwoRanks) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  EngineOptions o = Options();
  o.max_num_batched_tokens = 16;
  WithEngine(2, o, nullptr, [&](LLMEngine& e) { RunGoldenMix(e, golden, 3, 3, "tp2 x12"); });
}

TEST(EngineGoldenTest, SeedsAreReproducibleWhateverTheBatch) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  WithEngine(1, Options(), nullptr, [&](LLMEngine& e) {
    auto run = [&](const std::vector<GenerationRequest>& reqs) {
      std::vector<std::unique_ptr<Sink>> sinks;
      for (const auto& r : reqs) {
        sinks.push_back(std::make_unique<Sink>());
        EXPECT_TRUE(e.Submit(r, sinks.back()->Callback()).ok());
      }
      std::vector<std::vector<int32_t>> out;
      for (auto& s : sinks) {
        EXPECT_TRUE(s->Wait());
        out.push_back(s->Get().tokens);
      }
      return out;
    };
    const auto alone = run({SampledRequest("s1", golden[1], 77, 24)})[0];
    const auto crowd = run({SampledRequest("x1", golden[0], 5, 24), SampledRequest("s1b", golden[1], 77, 24),
                            GreedyRequest("g2", golden[2]), SampledRequest("d1", golden[1], 78, 24)});
    std::printf("seed 77 alone: %s\nseed 77 in a batch: %s\nseed 78: %s\n", Ids(alone, 12).c_str(),
                Ids(crowd[1], 12).c_str(), Ids(crowd[3], 12).c_str());
    EXPECT_EQ(alone, crowd[1]);
    EXPECT_NE(alone, crowd[3]);
    EXPECT_EQ(crowd[2], golden[2].greedy);
  });
}

TEST(EngineGoldenTest, CancelFreesAllBlocks) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  WithEngine(1, Options(), nullptr, [&](LLMEngine& e) {
    std::vector<std::unique_ptr<Sink>> sinks;
    for (int i = 0; i < 4; ++i) {
      sinks.push_back(std::make_unique<Sink>());
      auto r = SampledRequest("c" + std::to_string(i), golden[i % 3], i, 200);
      ASSERT_TRUE(e.Submit(r, sinks.back()->Callback()).ok());
    }
    ASSERT_TRUE(sinks[0]->WaitTokens(3));
    const int64_t used = e.Stats().kv_blocks_used;
    for (int i = 0; i < 4; ++i) e.Cancel("c" + std::to_string(i));
    for (auto& s : sinks) {
      ASSERT_TRUE(s->Wait(std::chrono::seconds(10)));
      EXPECT_EQ(s->Get().finish_reason, "abort");
    }
    const EngineStats st = e.Stats();
    std::printf("kv blocks used: %lld while running, %lld after cancelling all 4\n", static_cast<long long>(used),
                static_cast<long long>(st.kv_blocks_used));
    EXPECT_GT(used, 0);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.running + st.waiting, 0);
  });
}

TEST(EngineGoldenTest, MaxModelLenRejected) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  EngineOptions o = Options();
  o.max_model_len = 40;
  WithEngine(1, o, nullptr, [&](LLMEngine& e) {
    Sink sink;
    absl::Status st = e.Submit(GreedyRequest("too-long", golden[2]), sink.Callback());  // 33 + 16 > 40
    std::printf("33 + 16 tokens with max_model_len 40: %s\n", st.ToString().c_str());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("max_model_len 40"), std::string::npos);
    GenerationRequest r = GreedyRequest("bad-id", golden[1]);
    r.prompt_ids.push_back(4096);
    EXPECT_EQ(e.Submit(r, sink.Callback()).code(), absl::StatusCode::kInvalidArgument);
  });
}

// Stop strings through the real Qwen3 tokenizer (ids below 4096 decode to ordinary text).
TEST(EngineGoldenTest, StopStringsWithQwen3Tokenizer) {
  const auto golden = Golden();
  ASSERT_EQ(golden.size(), 3u);
  auto tok = tokenizer::Tokenizer::LoadFromDir(testing::TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const GoldenPrompt& g = golden[1];
  const std::string full = (*tok)->Decode(g.greedy, true);
  const std::string head = (*tok)->Decode(std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 6), true);
  ASSERT_GT(full.size(), head.size() + 4);
  // A stop string of 3 bytes that first occurs after the 6th token's text (so the request must
  // stream a while before it stops), plain ASCII so that it cuts no character.
  std::string stop;
  for (size_t pos = head.size(); pos + 3 <= full.size() && stop.empty(); ++pos) {
    const std::string cand = full.substr(pos, 3);
    const bool ascii = std::all_of(cand.begin(), cand.end(), [](char c) { return c > ' ' && c < 127; });
    if (ascii && full.find(cand) == pos) stop = cand;
  }
  ASSERT_FALSE(stop.empty()) << "no usable stop string in \"" << full << "\"";
  const std::string want = full.substr(0, full.find(stop));
  std::printf("golden text: \"%s\"\nstop string: \"%s\" -> expected \"%s\"\n", full.c_str(), stop.c_str(),
              want.c_str());
  WithEngine(1, Options(), tok->get(), [&](LLMEngine& e) {
    Sink plain, stopped;
    ASSERT_TRUE(e.Submit(GreedyRequest("plain", g), plain.Callback()).ok());
    GenerationRequest r = GreedyRequest("stopped", g);
    r.params.stop = {"never appears \xF0\x9F\x99\x82", stop};
    ASSERT_TRUE(e.Submit(r, stopped.Callback()).ok());
    ASSERT_TRUE(plain.Wait() && stopped.Wait());
    EXPECT_EQ(plain.Get().text, full);
    EXPECT_EQ(plain.Get().finish_reason, "length");
    const auto s = stopped.Get();
    std::printf("with the stop string: \"%s\" (%s, %zu tokens)\n", s.text.c_str(), s.finish_reason.c_str(),
                s.tokens.size());
    EXPECT_EQ(s.text, want);
    EXPECT_EQ(s.finish_reason, "stop");
    EXPECT_LT(s.tokens.size(), g.greedy.size());
    EXPECT_GT(s.tokens.size(), 6u);
  });
}

}  // namespace
}  // namespace tandem::engine
