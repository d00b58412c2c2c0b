// What the engine tells its observers beyond the tokens: on_finish with the phases of each
// finished request (engine/batching/request_metrics.h), on_turn from the engine thread at every
// turn (the systemd watchdog's sign of life, idle or busy), and the cache configuration in Stats
// that tandem_cache_config_info exports.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

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

TEST(EngineMetricsTest, FinishedRequestsReportTheirPhasesAndTheLoopTurnsWhileIdle) {
  FakeModel model(64);
  StepDriver driver(&model, nullptr);
  EngineOptions o = SmallOptions();
  std::mutex mu;
  std::vector<RequestMetrics> finished;
  std::atomic<int> turns{0};
  std::atomic<bool> turn_off_thread{false};
  std::thread::id engine_thread;
  o.on_finish = [&](const RequestMetrics& m) {
    std::lock_guard<std::mutex> l(mu);
    finished.push_back(m);
    engine_thread = std::this_thread::get_id();
  };
  o.on_turn = [&] { ++turns; };
  auto engine = LLMEngine::Create(&driver, nullptr, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->Stats().block_size, 4);
  EXPECT_EQ((*engine)->Stats().kv_cache_dtype, "f32");

  Sink sink;
  ASSERT_TRUE((*engine)->Submit(Greedy("a", {5, 6, 7}, 6), sink.Callback()).ok());
  ASSERT_TRUE(sink.Wait());
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_EQ(finished.size(), 1u);
    const RequestMetrics& m = finished[0];
    std::printf("queue %.6f s, prefill %.6f s, decode %.6f s, inference %.6f s\n", m.queue_seconds,
                m.prefill_seconds, m.decode_seconds, m.inference_seconds);
    EXPECT_EQ(m.finish_reason, "length");
    EXPECT_EQ(m.prompt_tokens, 3);
    EXPECT_EQ(m.generation_tokens, 6);
    EXPECT_TRUE(m.scheduled);
    EXPECT_GE(m.queue_seconds, 0);
    EXPECT_GT(m.prefill_seconds, 0);
    EXPECT_GT(m.decode_seconds, 0);  // five more steps after the first token
    EXPECT_NEAR(m.inference_seconds, m.prefill_seconds + m.decode_seconds, 1e-9);
    EXPECT_NE(engine_thread, std::this_thread::get_id());
  }
  // Idle, the loop still turns about once a second (its worker heartbeat).
  const int before = turns.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(2300));
  std::printf("%d turns in 2.3 s idle\n", turns.load() - before);
  EXPECT_GE(turns.load() - before, 2);
}

}  // namespace
}  // namespace tandem::engine
