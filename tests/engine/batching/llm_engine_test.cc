// The engine's own logic over a fake model (logits are a fixed function of the last token):
// validation, eos and stop tokens, cancellation, admission limits, the step observer, and a fatal
// step error that must fail every request at once.
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "engine/batching/llm_engine.h"
#include "engine/step_driver.h"
#include "tests/engine/batching/llm_engine_test_util.h"
#include "tests/engine/fake_model.h"

namespace tandem::engine {
namespace {

using testing::FakeModel;
using testing::Greedy;
using testing::Sink;
using testing::SmallOptions;
using Clock = std::chrono::steady_clock;

constexpr int64_t kVocab = 64;

// The tokens FakeModel produces after `last`.
std::vector<int32_t> Expected(int32_t last, int n, int64_t vocab = kVocab) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(last = FakeModel::Next(last, vocab));
  return out;
}

TEST(EngineFakeModelTest, KvTokensBeyondHostMemoryAreRefused) {
  // An explicit kv_tokens is taken as given, but not past MemAvailable: 2^31 blocks of 65536
  // tokens of 32 bytes (4.5 PB) must come back as an error, not as an allocation that ends the
  // process.
  FakeModel model(kVocab);
  StepDriver driver(&model, nullptr);
  EngineOptions o = SmallOptions();
  o.block_size = 1 << 16;
  o.kv_tokens = int64_t{1} << 62;
  auto engine = LLMEngine::Create(&driver, nullptr, o);
  ASSERT_FALSE(engine.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(engine.status())) << engine.status();
  std::printf("refused: %s\n", std::string(engine.status().message()).c_str());
}

TEST(EngineFakeModelTest, LengthAndUsage) {
  FakeModel model(kVocab);
  StepDriver driver(&model, nullptr);
  auto engine = LLMEngine::Create(&driver, nullptr, SmallOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->Stats().kv_tokens_total, 256);
  EXPECT_EQ((*engine)->Stats().kv_blocks_total, 64);
  Sink sink;
  ASSERT_TRUE((*engine)->Submit(Greedy("a", {5, 6, 7}, 6), sink.Callback()).ok());
  ASSERT_TRUE(sink.Wait());
  auto r = sink.Get();
  EXPECT_EQ(r.tokens, Expected(7, 6));
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.prompt_tokens, 3);
  EXPECT_EQ(r.completion_tokens, 6);
  EXPECT_EQ(r.events, 7);  // one per token, then the final one
  EXPECT_FALSE(r.event_after_final);
  const EngineStats st = (*engine)->Stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.generation_tokens_total, 6);
  EXPECT_EQ(st.prompt_tokens_total, 3);
  EXPECT_EQ(st.iterations, 6);
}

// Sized from 1% of MemAvailable, capped at 8 sequences of 100 tokens.
EngineOptions MemorySizedOptions() {
  EngineOptions o;
  o.kv_tokens = 0;
  o.memory_fraction = 0.01;
  o.block_size = 4;
  o.max_num_seqs = 8;
  o.max_model_len = 100;
  return o;
}

TEST(EngineFakeModelTest, KvPoolFromMemoryIsCapped) {
  FakeModel model(kVocab);  // 32 bytes of KV per token: any real machine's memory exceeds the cap
  StepDriver driver(&model, nullptr);
  auto engine = LLMEngine::Create(&driver, nullptr, MemorySizedOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  const EngineStats s = (*engine)->Stats();
  std::printf("memory-sized pool: %lld tokens in %lld blocks (cap 8 x 100)\n",
              static_cast<long long>(s.kv_tokens_total), static_cast<long long>(s.kv_blocks_total));
  EXPECT_EQ(s.kv_tokens_total, 800);
  EXPECT_EQ(s.kv_blocks_total, 200);
  EXPECT_EQ(driver.num_kv_blocks(), 200);
  EXPECT_EQ(driver.kv_block_size(), 4);
}

// The fake model with eos 10, its driver, and an engine of SmallOptions over them.
struct EosTenEngine {
  FakeModel model{kVocab};
  StepDriver driver{&model, nullptr};
  absl::StatusOr<std::unique_ptr<LLMEngine>> engine;
  EosTenEngine() : engine(Create(model, driver)) {}
  static absl::StatusOr<std::unique_ptr<LLMEngine>> Create(FakeModel& m, StepDriver& d) {
    m.SetEos({10});  // read by the engine when it is created
    return LLMEngine::Create(&d, nullptr, SmallOptions());
  }
};

TEST(EngineFakeModelTest, EosFromConfigAndStopTokenIds) {
  // From 7 the fake model goes 8, 9, 10, 11, 12, ...: eos 10 stops after two tokens.
  EosTenEngine f;
  auto& engine = f.engine;
  ASSERT_TRUE(engine.ok()) << engine.status();
  const auto seq = Expected(7, 8);
  std::printf("fake continuation of 7:");
  for (int32_t t : seq) std::printf(" %d", t);
  std::printf("\n");
  ASSERT_EQ(seq[2], 10);

  Sink eos, ignored, stop_ids;
  ASSERT_TRUE((*engine)->Submit(Greedy("eos", {7}, 8), eos.Callback()).ok());
  auto req = Greedy("ignore", {7}, 8);
  req.params.ignore_eos = true;
  ASSERT_TRUE((*engine)->Submit(req, ignored.Callback()).ok());
  req = Greedy("stop_ids", {7}, 8);
  req.params.ignore_eos = true;
  req.params.stop_token_ids = {seq[4]};
  ASSERT_TRUE((*engine)->Submit(req, stop_ids.Callback()).ok());
  ASSERT_TRUE(eos.Wait() && ignored.Wait() && stop_ids.Wait());

  EXPECT_EQ(eos.Get().tokens, std::vector<int32_t>(seq.begin(), seq.begin() + 2));
  EXPECT_EQ(eos.Get().finish_reason, "stop");
  EXPECT_EQ(eos.Get().completion_tokens, 3);  // the eos token was generated
  EXPECT_EQ(ignored.Get().tokens, seq);
  EXPECT_EQ(ignored.Get().finish_reason, "length");
  EXPECT_EQ(stop_ids.Get().tokens, std::vector<int32_t>(seq.begin(), seq.begin() + 4));
  EXPECT_EQ(stop_ids.Get().finish_reason, "stop");
}

// The fake model's logits are 1 at Next(last) and 0 elsewhere, so each setting's effect on the
// greedy path is worked out by hand below.
TEST(EngineFakeModelTest, MinTokensLogitBiasAndPenalties) {
  EosTenEngine f;
  auto& engine = f.engine;
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto run = [&](GenerationRequest req) {
    Sink sink;
    EXPECT_TRUE((*engine)->Submit(std::move(req), sink.Callback()).ok());
    EXPECT_TRUE(sink.Wait());
    return sink.Get();
  };
  // From 7: 8, 9, then eos 10. Under min_tokens 4 the eos is masked at the third token, every
  // other logit is 0 and the lowest id wins: 0, then 1, 2, 3.
  auto req = Greedy("min4", {7}, 6);
  req.params.min_tokens = 4;
  auto got = run(req);
  EXPECT_EQ(got.tokens, (std::vector<int32_t>{8, 9, 0, 1, 2, 3}));
  EXPECT_EQ(got.finish_reason, "length");
  req = Greedy("min2", {7}, 6);
  req.params.min_tokens = 2;  // the eos comes as the third token: allowed
  got = run(req);
  EXPECT_EQ(got.tokens, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(got.finish_reason, "stop");
  // A stop token id is masked the same way: 9 would stop at the second token.
  req = Greedy("min_stop", {7}, 3);
  req.params.stop_token_ids = {9};
  req.params.min_tokens = 2;
  req.params.ignore_eos = true;
  EXPECT_EQ(run(req).tokens, (std::vector<int32_t>{8, 0, 1}));

  // logit_bias: 8 drops to -1, 20 rises to 0.5 and wins; then the model's own 21, 22.
  req = Greedy("bias", {7}, 3);
  req.params.logit_bias = {{8, -2.0f}, {20, 0.5f}};
  EXPECT_EQ(run(req).tokens, (std::vector<int32_t>{20, 21, 22}));

  // repetition_penalty 2 over the prompt {8, 7}: the model's 8 falls to 0.5 under 30's bias of
  // 0.75; then 31 (1) beats the repeated 30 (0.75 / 2). Without the penalty the model's 8 (1)
  // wins, then 9, then eos.
  req = Greedy("rep", {8, 7}, 3);
  req.params.logit_bias = {{30, 0.75f}};
  EXPECT_EQ(run(req).tokens, (std::vector<int32_t>{8, 9}));
  req.params.repetition_penalty = 2.0f;
  req.request_id = "rep2";
  EXPECT_EQ(run(req).tokens, (std::vector<int32_t>{30, 31, 32}));

  // Token 5 biased to 2 beats the model's 1 forever without penalties. frequency_penalty 0.6:
  // 2, then 2 - 0.6 = 1.4 (5 again), then 2 - 1.2 = 0.8 < 1: the model's 6, 7, 8.
  req = Greedy("freq", {7}, 5);
  req.params.logit_bias = {{5, 2.0f}};
  EXPECT_EQ(run(req).tokens, (std::vector<int32_t>{5, 5, 5, 5, 5}));
  req.request_id = "freq2";
  req.params.frequency_penalty = 0.6f;
  EXPECT_EQ(run(req).tokens, (std::vector<int32_t>{5, 5, 6, 7, 8}));
  // presence_penalty 0.6 alone: 1.4 every time; 1.5: 0.5 after the first, so 6, 7, 8, 9.
  req.request_id = "pres";
  req.params.frequency_penalty = 0.0f;
  req.params.presence_penalty = 0.6f;
  EXPECT_EQ(run(req).tokens, (std::vector<int32_t>{5, 5, 5, 5, 5}));
  req.request_id = "pres2";
  req.params.presence_penalty = 1.5f;
  EXPECT_EQ(run(req).tokens, (std::vector<int32_t>{5, 6, 7, 8, 9}));
}

TEST(EngineFakeModelTest, ValidationErrors) {
  FakeModel model(kVocab);
  StepDriver driver(&model, nullptr);
  auto engine = LLMEngine::Create(&driver, nullptr, SmallOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  LLMEngine& e = **engine;
  Sink sink;
  auto expect = [&](GenerationRequest r, absl::StatusCode code, const char* what) {
    absl::Status st = e.Submit(std::move(r), sink.Callback());
    std::printf("%s -> %s\n", what, st.ToString().c_str());
    EXPECT_EQ(st.code(), code) << what;
  };
  expect(Greedy("empty", {}, 4), absl::StatusCode::kInvalidArgument, "empty prompt");
  expect(Greedy("big", {1, 64}, 4), absl::StatusCode::kInvalidArgument, "token id = vocab");
  expect(Greedy("neg", {-1}, 4), absl::StatusCode::kInvalidArgument, "negative token id");
  expect(Greedy("long", std::vector<int32_t>(100, 1), 29), absl::StatusCode::kInvalidArgument,
         "100 + 29 > max_model_len 128");
  expect(Greedy("zero", {1}, 0), absl::StatusCode::kInvalidArgument, "max_tokens 0");
  // Each sampling setting outside what the engine takes (max_tokens is 4).
  const std::pair<const char*, std::function<void(SamplingParams&)>> out_of_range[] = {
      {"top_p 0", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"min_tokens 5 > max_tokens 4", [](SamplingParams& p) { p.min_tokens = 5; }},
      {"logit_bias token = vocab", [](SamplingParams& p) { p.logit_bias = {{64, 1.0f}}; }},
      {"logit_bias 101", [](SamplingParams& p) { p.logit_bias = {{3, 101.0f}}; }},
      {"min_p 1.5", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"repetition_penalty 0", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"frequency_penalty 2.5", [](SamplingParams& p) { p.frequency_penalty = 2.5f; }},
  };
  for (const auto& [what, set] : out_of_range) {
    auto bad = Greedy(what, {1}, 4);
    set(bad.params);
    expect(bad, absl::StatusCode::kInvalidArgument, what);
  }
  // Exactly max_model_len is fine.
  Sink ok;
  ASSERT_TRUE(e.Submit(Greedy("fits", std::vector<int32_t>(100, 1), 28), ok.Callback()).ok());
  ASSERT_TRUE(ok.Wait());
  EXPECT_EQ(ok.Get().tokens.size(), 28u);
  EXPECT_EQ(sink.Get().events, 0);  // refused requests get no events
}

TEST(EngineFakeModelTest, CancelFreesBlocksAndQueueLimitRefuses) {
  FakeModel model(kVocab);
  StepDriver driver(&model, nullptr);
  EngineOptions o = SmallOptions();
  o.max_num_seqs = 1;
  o.max_waiting = 2;
  auto engine = LLMEngine::Create(&driver, nullptr, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  LLMEngine& e = **engine;
  Sink running, queued1, queued2, refused;
  model.Hold(true);  // steps stall: the queue can only grow
  ASSERT_TRUE(e.Submit(Greedy("running", {1, 2, 3, 4, 5}, 100), running.Callback()).ok());
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (e.Stats().running < 1 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(e.Stats().running, 1);  // its first step is in flight (and held)
  ASSERT_TRUE(e.Submit(Greedy("q1", {1}, 10), queued1.Callback()).ok());
  ASSERT_TRUE(e.Submit(Greedy("q2", {1}, 10), queued2.Callback()).ok());
  absl::Status st = e.Submit(Greedy("q3", {1}, 10), refused.Callback());
  std::printf("third queued request: %s\n", st.ToString().c_str());
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(e.Submit(Greedy("running", {1}, 10), refused.Callback()).code(), absl::StatusCode::kAlreadyExists);
  Sink probe;
  GenerationRequest p = Greedy("probe", {9}, 2);
  p.priority = true;  // probes are never refused for load
  ASSERT_TRUE(e.Submit(p, probe.Callback()).ok());
  EXPECT_GT(e.Stats().kv_blocks_used, 0);
  e.Cancel("running");
  e.Cancel("q2");
  e.Cancel("no-such-request");
  model.Hold(false);
  ASSERT_TRUE(running.Wait() && queued2.Wait() && queued1.Wait());
  EXPECT_EQ(running.Get().finish_reason, "abort");
  EXPECT_LT(running.Get().tokens.size(), 100u);
  EXPECT_EQ(queued2.Get().finish_reason, "abort");
  EXPECT_TRUE(queued2.Get().tokens.empty());
  EXPECT_EQ(queued1.Get().finish_reason, "length");
  EXPECT_EQ(queued1.Get().tokens, Expected(1, 10));
  ASSERT_TRUE(probe.Wait());
  EXPECT_EQ(probe.Get().tokens, Expected(9, 2));
  const EngineStats s = e.Stats();
  std::printf("after cancel: running %d waiting %d kv blocks used %lld of %lld\n", s.running, s.waiting,
              static_cast<long long>(s.kv_blocks_used), static_cast<long long>(s.kv_blocks_total));
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
}

TEST(EngineFakeModelTest, FatalStepErrorFailsEverythingAtOnce) {
  FakeModel model(kVocab);
  StepDriver driver(&model, nullptr);
  EngineOptions o = SmallOptions();
  o.max_num_seqs = 2;  // some requests stay queued
  auto engine = LLMEngine::Create(&driver, nullptr, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  LLMEngine& e = **engine;
  model.Hold(true);
  std::vector<std::unique_ptr<Sink>> sinks;
  for (int i = 0; i < 5; ++i) {
    sinks.push_back(std::make_unique<Sink>());
    ASSERT_TRUE(e.Submit(Greedy("r" + std::to_string(i), {1, 2}, 50), sinks.back()->Callback()).ok());
  }
  model.FailAfter(3, absl::DeadlineExceededError(
                         "all-reduce did not complete within 30000 ms (peer rank 1 lost)"));
  const auto t0 = Clock::now();
  model.Hold(false);
  for (auto& s : sinks) ASSERT_TRUE(s->Wait(std::chrono::seconds(5)));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("5 requests failed %.1f ms after the step error\n", ms);
  for (auto& s : sinks) {
    const auto r = s->Get();
    EXPECT_EQ(r.finish_reason, "error");
    EXPECT_EQ(r.error.code(), absl::StatusCode::kUnavailable) << r.error;
    EXPECT_NE(r.error.message().find("peer rank 1 lost"), std::string::npos) << r.error;
  }
  EXPECT_FALSE(e.healthy());
  EXPECT_EQ(e.fatal_error().code(), absl::StatusCode::kUnavailable);
  Sink late;
  absl::Status st = e.Submit(Greedy("late", {1}, 4), late.Callback());
  std::printf("submit after the failure: %s\n", st.ToString().c_str());
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(e.Stats().kv_blocks_used, 0);
  e.Shutdown();
}

TEST(EngineFakeModelTest, StepObserverAndShutdownAborts) {
  FakeModel model(kVocab);
  StepDriver driver(&model, nullptr);
  EngineOptions o = SmallOptions();
  std::atomic<int64_t> steps{0}, tokens{0};
  o.on_step = [&](const StepMetrics& m) {
    steps.fetch_add(1);
    tokens.fetch_add(m.batch_tokens);
    EXPECT_EQ(m.batch_tokens, m.prefill_tokens + m.decode_tokens);
    EXPECT_GE(m.seconds, 0.0);
  };
  auto engine = LLMEngine::Create(&driver, nullptr, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  Sink a, b;
  ASSERT_TRUE((*engine)->Submit(Greedy("a", {1, 2, 3}, 5), a.Callback()).ok());
  ASSERT_TRUE(a.Wait());
  EXPECT_EQ(steps.load(), (*engine)->Stats().iterations);
  EXPECT_EQ(tokens.load(), 3 + 4);  // the prompt, then 4 decodes (the 5th token is never fed)
  model.Hold(true);
  ASSERT_TRUE((*engine)->Submit(Greedy("b", {1, 2, 3}, 50), b.Callback()).ok());
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    model.Hold(false);
  });
  (*engine)->Shutdown();
  release.join();
  ASSERT_TRUE(b.Wait(std::chrono::seconds(5)));
  EXPECT_EQ(b.Get().finish_reason, "abort");
  EXPECT_EQ((*engine)->Submit(Greedy("c", {1}, 2), a.Callback()).code(), absl::StatusCode::kUnavailable);
}

// A model with per-sequence state (FakeModel::WithState checks every chunk continues its slot):
// max_num_seqs slots are allocated, each running request holds one, finished ones are reused.
TEST(EngineFakeModelTest, StateSlotsAreHeldByRunningRequestsAndReused) {
  FakeModel model(kVocab);
  model.WithState(1000);
  StepDriver driver(&model, nullptr);
  EngineOptions o = SmallOptions();
  o.max_num_seqs = 3;
  o.max_num_batched_tokens = 8;  // long prompts are chunked: their slot must carry over
  auto engine = LLMEngine::Create(&driver, nullptr, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  LLMEngine& e = **engine;
  EXPECT_EQ(model.state_slots, 3);
  EXPECT_EQ(e.Stats().state_slots_total, 3);
  std::vector<Sink> sinks(12);
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt;
    for (int j = 0; j < 1 + (i * 5) % 17; ++j) prompt.push_back((i + j) % static_cast<int32_t>(kVocab));
    ASSERT_TRUE(e.Submit(Greedy("r" + std::to_string(i), prompt, 2 + i % 5), sinks[i].Callback()).ok());
  }
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(sinks[i].Wait());
    const auto r = sinks[i].Get();
    EXPECT_EQ(r.finish_reason, "length") << i << ": " << r.error;
    const int32_t last = static_cast<int32_t>((i + (i * 5) % 17) % kVocab);
    EXPECT_EQ(r.tokens, Expected(last, 2 + i % 5)) << i;
  }
  const EngineStats s = e.Stats();
  EXPECT_EQ(s.state_slots_used, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_TRUE(e.healthy());
}

TEST(EngineFakeModelTest, CancelGivesTheStateSlotToTheNextRequest) {
  FakeModel model(kVocab);
  model.WithState(1000);
  StepDriver driver(&model, nullptr);
  EngineOptions o = SmallOptions();
  o.max_num_seqs = 1;  // one slot: "next" can only run once "long" gives it back
  auto engine = LLMEngine::Create(&driver, nullptr, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  LLMEngine& e = **engine;
  Sink long_sink, next_sink;
  model.Hold(true);  // "long" stays in its first step until cancelled
  ASSERT_TRUE(e.Submit(Greedy("long", {1, 2, 3}, 100), long_sink.Callback()).ok());
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (e.Stats().running < 1 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(e.Submit(Greedy("next", {7, 8}, 5), next_sink.Callback()).ok());
  EXPECT_EQ(e.Stats().state_slots_used, 1);
  e.Cancel("long");
  model.Hold(false);
  ASSERT_TRUE(long_sink.Wait() && next_sink.Wait());
  EXPECT_EQ(long_sink.Get().finish_reason, "abort");
  EXPECT_EQ(next_sink.Get().finish_reason, "length") << next_sink.Get().error;
  EXPECT_EQ(next_sink.Get().tokens, Expected(8, 5));
  EXPECT_EQ(e.Stats().state_slots_used, 0);
}

TEST(EngineFakeModelTest, StateSlotsComeOutOfTheMemoryBudget) {
  // 1 KiB slots: max_num_seqs of them fit in any machine's budget; the KV cap stays 8 x 100.
  FakeModel model(kVocab);
  model.WithState(1024);
  StepDriver driver(&model, nullptr);
  const EngineOptions o = MemorySizedOptions();
  auto engine = LLMEngine::Create(&driver, nullptr, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->Stats().state_slots_total, 8);
  EXPECT_EQ((*engine)->Stats().kv_tokens_total, 800);
  (*engine)->Shutdown();
  // 32 TiB slots: not one fits beside a KV block; refused naming the slot's size.
  FakeModel huge(kVocab);
  huge.WithState(int64_t{1} << 45);
  StepDriver huge_driver(&huge, nullptr);
  auto refused = LLMEngine::Create(&huge_driver, nullptr, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("one state slot (35184372088832 bytes per rank)"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace tandem::engine
