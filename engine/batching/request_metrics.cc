#include "engine/batching/request_metrics.h"

namespace tandem::engine {
namespace {

double Seconds(RequestClock::time_point from, RequestClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

RequestMetrics MeasureRequest(const RequestTimes& t, RequestClock::time_point end, std::string finish_reason,
                              int64_t prompt_tokens, int64_t generation_tokens) {
  RequestMetrics m;
  m.finish_reason = std::move(finish_reason);
  m.prompt_tokens = prompt_tokens;
  m.generation_tokens = generation_tokens;
  m.scheduled = t.scheduled.has_value();
  if (!t.scheduled) {
    m.queue_seconds = Seconds(t.submitted, end);
    return m;
  }
  m.queue_seconds = Seconds(t.submitted, *t.scheduled);
  m.inference_seconds = Seconds(*t.scheduled, t.last_token.value_or(end));
  if (t.first_token) {
    m.prefill_seconds = Seconds(*t.scheduled, *t.first_token);
    m.decode_seconds = Seconds(*t.first_token, *t.last_token);
  }
  return m;
}

}  // namespace tandem::engine
