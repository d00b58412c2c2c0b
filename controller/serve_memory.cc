#include "controller/serve_memory.h"

#include <chrono>
#include <deque>
#include <string>
#include <vector>

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

// The fields that survive, listed once for both directions so that a field added here is
// written and read back alike. `move(memory_field, record_field)` carries one field whichever
// way the converter goes.
template <typename Memory, typename Record, typename Move>
void EachField(Memory& m, Record& r, const Move& move) {
  move(m.restarts, r.restarts);
  move(m.consecutive_failures, r.consecutive_failures);
  move(m.next_restart_at, r.next_restart_unix_ms);
  move(m.preflight_failures, r.preflight_failures);
  move(m.next_preflight_at, r.next_preflight_unix_ms);
  move(m.last_preflight_error, r.last_preflight_error);
  move(m.operator_needed, r.operator_needed);
  move(m.waiting, r.waiting);
  move(m.waiting_detail, r.waiting_detail);
  move(m.waiting_since, r.waiting_since_unix_ms);
}

// Memory -> record: steady times to wall-clock milliseconds, the wait reason to its name.
struct ToRecord {
  TimePoint steady_now;
  int64_t unix_now_ms;
  template <typename T>
  void operator()(const T& from, T& to) const { to = from; }
  void operator()(TimePoint from, int64_t& to) const { to = ToUnixMs(from, steady_now, unix_now_ms); }
  void operator()(WaitReason from, std::string& to) const { to = WaitReasonName(from); }
  void operator()(const std::deque<RestartAttempt>& from, std::vector<RestartRecord>& to) const {
    for (const RestartAttempt& a : from) to.push_back({ToUnixMs(a.at, steady_now, unix_now_ms), a.ok, a.detail});
  }
};

// Record -> memory, the inverse of each ToRecord step.
struct FromRecord {
  TimePoint steady_now;
  int64_t unix_now_ms;
  template <typename T>
  void operator()(T& to, const T& from) const { to = from; }
  void operator()(TimePoint& to, int64_t from) const { to = FromUnixMs(from, steady_now, unix_now_ms); }
  void operator()(WaitReason& to, const std::string& from) const { to = ParseWaitReason(from); }
  void operator()(std::deque<RestartAttempt>& to, const std::vector<RestartRecord>& from) const {
    for (const RestartRecord& a : from) to.push_back({FromUnixMs(a.at_unix_ms, steady_now, unix_now_ms), a.ok, a.detail});
  }
};

}  // namespace

ServeRecord ToServeRecord(const ReconcilerMemory& m, TimePoint steady_now, int64_t unix_now_ms) {
  ServeRecord r;
  EachField(m, r, ToRecord{steady_now, unix_now_ms});
  return r;
}

ReconcilerMemory FromServeRecord(const ServeRecord& r, TimePoint steady_now, int64_t unix_now_ms) {
  ReconcilerMemory m;
  EachField(m, r, FromRecord{steady_now, unix_now_ms});
  return m;
}

}  // namespace tandem::controller
