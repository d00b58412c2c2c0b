// How long one finished request spent in each phase, the split vLLM's per-request histograms use
// (request_queue_time, request_prefill_time, request_decode_time, request_inference_time): the
// engine stamps a RequestTimes as the request moves and hands MeasureRequest's result to
// EngineOptions::on_finish (the serving metrics observe it).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace tandem::engine {

using RequestClock = std::chrono::steady_clock;

// Stamped on the engine thread.
struct RequestTimes {
  RequestTimes() = default;
  explicit RequestTimes(RequestClock::time_point submitted_at) : submitted(submitted_at) {}

  RequestClock::time_point submitted;                  // Submit accepted it
  std::optional<RequestClock::time_point> scheduled;   // first step that ran any of it
  std::optional<RequestClock::time_point> first_token;
  std::optional<RequestClock::time_point> last_token;

  void Scheduled(RequestClock::time_point t) {
    if (!scheduled) scheduled = t;  // a preempted request keeps its first time: vLLM does too
  }
  void Token(RequestClock::time_point t) {
    if (!first_token) first_token = t;
    last_token = t;
  }
};

struct RequestMetrics {
  std::string finish_reason;     // as in its final GenerationEvent
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  bool scheduled = false;        // false: it ended (cancelled, failed) before any step ran it
  double queue_seconds = 0;      // submitted -> first scheduled (-> the end when never scheduled)
  double prefill_seconds = 0;    // first scheduled -> first token (0 without a token)
  double decode_seconds = 0;     // first token -> last token
  double inference_seconds = 0;  // first scheduled -> last token (-> the end without a token)
};

// The phases of a request that ended at `end`.
RequestMetrics MeasureRequest(const RequestTimes& times, RequestClock::time_point end, std::string finish_reason,
                              int64_t prompt_tokens, int64_t generation_tokens);

}  // namespace tandem::engine
