// The phases of a request from its stamps: queue, prefill, decode and inference time as vLLM
// splits them, a preempted request keeping its first scheduled time, and requests that ended
// before any step ran them or before any token.
#include "engine/batching/request_metrics.h"

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

using std::chrono::milliseconds;

TEST(RequestMetricsTest, PhasesOfARequestThatRanToItsEnd) {
  const RequestClock::time_point t0{};
  RequestTimes t;
  t.submitted = t0;
  t.Scheduled(t0 + milliseconds(250));
  t.Scheduled(t0 + milliseconds(900));  // rescheduled after a preemption: the first time counts
  t.Token(t0 + milliseconds(400));
  t.Token(t0 + milliseconds(500));
  t.Token(t0 + milliseconds(1400));
  const RequestMetrics m = MeasureRequest(t, t0 + milliseconds(1500), "length", 7, 3);
  EXPECT_EQ(m.finish_reason, "length");
  EXPECT_EQ(m.prompt_tokens, 7);
  EXPECT_EQ(m.generation_tokens, 3);
  EXPECT_TRUE(m.scheduled);
  EXPECT_DOUBLE_EQ(m.queue_seconds, 0.25);
  EXPECT_DOUBLE_EQ(m.prefill_seconds, 0.15);
  EXPECT_DOUBLE_EQ(m.decode_seconds, 1.0);
  EXPECT_DOUBLE_EQ(m.inference_seconds, 1.15);  // prefill + decode
}

TEST(RequestMetricsTest, EndedBeforeAStepOrBeforeAToken) {
  const RequestClock::time_point t0{};
  RequestTimes queued;
  queued.submitted = t0;
  const RequestMetrics never = MeasureRequest(queued, t0 + milliseconds(300), "abort", 5, 0);
  EXPECT_FALSE(never.scheduled);
  EXPECT_DOUBLE_EQ(never.queue_seconds, 0.3);  // all of its life was queue
  EXPECT_EQ(never.inference_seconds, 0);
  EXPECT_EQ(never.prefill_seconds, 0);

  RequestTimes prefilling = queued;
  prefilling.Scheduled(t0 + milliseconds(100));
  const RequestMetrics cut = MeasureRequest(prefilling, t0 + milliseconds(600), "abort", 5, 0);
  EXPECT_TRUE(cut.scheduled);
  EXPECT_DOUBLE_EQ(cut.queue_seconds, 0.1);
  EXPECT_DOUBLE_EQ(cut.inference_seconds, 0.5);  // ran until the end without a token
  EXPECT_EQ(cut.prefill_seconds, 0);
  EXPECT_EQ(cut.decode_seconds, 0);
}

}  // namespace
}  // namespace tandem::engine
