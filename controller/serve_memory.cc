#include "controller/serve_memory.h"

#include <chrono>

namespace tandem::controller {
namespace {

using std::chrono::milliseconds;

// TimePoint{} (never set) <-> 0.
int64_t ToUnixMs(TimePoint t, TimePoint steady_now, int64_t unix_now_ms) {
  if (t == TimePoint{}) return 0;
  return unix_now_ms - std::chrono::duration_cast<milliseconds>(steady_now - t).count();
}

TimePoint FromUnixMs(int64_t ms, TimePoint steady_now, int64_t unix_now_ms) {
  if (ms == 0) return TimePoint{};
  return steady_now - milliseconds(unix_now_ms - ms);
}

}  // namespace

ServeRecord ToServeRecord(const ReconcilerMemory& m, TimePoint steady_now, int64_t unix_now_ms) {
  ServeRecord r;
  for (const RestartAttempt& a : m.restarts) {
    r.restarts.push_back({ToUnixMs(a.at, steady_now, unix_now_ms), a.ok, a.detail});
  }
  r.consecutive_failures = m.consecutive_failures;
  r.next_restart_unix_ms = ToUnixMs(m.next_restart_at, steady_now, unix_now_ms);
  r.preflight_failures = m.preflight_failures;
  r.next_preflight_unix_ms = ToUnixMs(m.next_preflight_at, steady_now, unix_now_ms);
  r.last_preflight_error = m.last_preflight_error;
  r.operator_needed = m.operator_needed;
  r.waiting = WaitReasonName(m.waiting);
  r.waiting_detail = m.waiting_detail;
  r.waiting_since_unix_ms = ToUnixMs(m.waiting_since, steady_now, unix_now_ms);
  return r;
}

ReconcilerMemory FromServeRecord(const ServeRecord& r, TimePoint steady_now, int64_t unix_now_ms) {
  ReconcilerMemory m;
  for (const RestartRecord& a : r.restarts) {
    m.restarts.push_back({FromUnixMs(a.at_unix_ms, steady_now, unix_now_ms), a.ok, a.detail});
  }
  m.consecutive_failures = r.consecutive_failures;
  m.next_restart_at = FromUnixMs(r.next_restart_unix_ms, steady_now, unix_now_ms);
  m.preflight_failures = r.preflight_failures;
  m.next_preflight_at = FromUnixMs(r.next_preflight_unix_ms, steady_now, unix_now_ms);
  m.last_preflight_error = r.last_preflight_error;
  m.operator_needed = r.operator_needed;
  m.waiting = ParseWaitReason(r.waiting);
  m.waiting_detail = r.waiting_detail;
  m.waiting_since = FromUnixMs(r.waiting_since_unix_ms, steady_now, unix_now_ms);
  return m;
}

}  // namespace tandem::controller
