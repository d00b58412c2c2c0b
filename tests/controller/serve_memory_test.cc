// serve's restart budget through the state file: the memory one `serve` process leaves behind
// is the memory the next one starts from, although the two share no steady clock.
#include "controller/serve_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace tandem::controller {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

DesiredSpec Desired() {
  DesiredSpec d;
  d.restart_budget = 3;
  d.restart_window = minutes(10);
  d.backoff_initial = seconds(2);
  return d;
}

ObservedState BrokenGroup() {
  ObservedState o;
  o.nodes.resize(2);
  for (int i = 0; i < 2; ++i) {
    o.nodes[i].name = i == 0 ? "head" : "worker";
    o.nodes[i].reachable = true;
    o.nodes[i].state = i == 0 ? v1::RANK_STATE_SERVING : v1::RANK_STATE_FAILED;
    o.nodes[i].generation = 4;
  }
  return o;
}

TEST(ServeMemory, ConvertsBetweenClocksExactly) {
  const TimePoint steady = TimePoint() + std::chrono::hours(5);
  const int64_t unix_ms = 1'700'000'000'000;
  ReconcilerMemory m;
  m.restarts = {{steady - seconds(90), false, "failed in join: n2: deadline"},
                {steady - seconds(30), true, "serving generation 8"}};
  m.consecutive_failures = 2;
  m.next_restart_at = steady + seconds(4);
  m.preflight_failures = 1;
  m.next_preflight_at = steady + seconds(2);
  m.last_preflight_error = "weights-parity on n2 (found: abc)";
  m.operator_needed = true;
  m.waiting = WaitReason::kPreflightFailed;
  m.waiting_detail = "weights-parity on n2 (found: abc)";
  m.waiting_since = steady - seconds(1);
  ServeRecord r = ToServeRecord(m, steady, unix_ms);
  ASSERT_EQ(r.restarts.size(), 2u);
  EXPECT_EQ(r.restarts[0].at_unix_ms, unix_ms - 90'000);
  EXPECT_EQ(r.next_restart_unix_ms, unix_ms + 4'000);
  EXPECT_EQ(r.waiting, "preflight_failed");
  EXPECT_EQ(r.waiting_since_unix_ms, unix_ms - 1'000);
  ReconcilerMemory back = FromServeRecord(r, steady, unix_ms);
  EXPECT_EQ(back.restarts, m.restarts);
  EXPECT_EQ(back.next_restart_at, m.next_restart_at);
  EXPECT_EQ(back.next_preflight_at, m.next_preflight_at);
  EXPECT_EQ(back.waiting, m.waiting);
  EXPECT_EQ(back.waiting_since, m.waiting_since);
  EXPECT_EQ(back.operator_needed, true);
  EXPECT_EQ(back.consecutive_failures, 2);
  EXPECT_EQ(back.preflight_failures, 1);
  EXPECT_EQ(back.last_preflight_error, m.last_preflight_error);
  EXPECT_EQ(back.waiting_detail, m.waiting_detail);
  // Unset times stay unset (not "the steady clock's epoch, 50 years ago").
  ReconcilerMemory empty;
  ServeRecord er = ToServeRecord(empty, steady, unix_ms);
  EXPECT_EQ(er.next_restart_unix_ms, 0);
  EXPECT_EQ(FromServeRecord(er, steady, unix_ms).next_restart_at, TimePoint{});
}

// Process 1 counts three failed attempts and writes the file; process 2 starts 5 minutes
// later with an unrelated steady clock (say the host rebooted): the budget is still spent,
// and 6 minutes after that the oldest attempts have left the window.
TEST(ServeMemory, BudgetSurvivesARestartOfServe) {
  std::string dir = ::testing::TempDir() + "/serve-memory-" + std::to_string(getpid());
  const DesiredSpec d = Desired();
  const int64_t unix0 = 1'700'000'000'000;
  const TimePoint p1 = TimePoint() + std::chrono::hours(100);  // process 1's steady clock at unix0
  ReconcilerMemory m;
  TimePoint now = p1;
  for (int i = 0; i < 3; ++i) {
    Actions a = Reconcile(d, BrokenGroup(), m, now);
    ASSERT_TRUE(a.Has(ActionKind::kRestart)) << a.reason;
    m = RecordPreflight(d, a.memory, true, "", now);
    m = RecordRestart(d, m, false, "failed in probe: ids differ", now, now + seconds(5));
    now += minutes(1);
  }
  Actions spent = Reconcile(d, BrokenGroup(), m, now);
  ASSERT_TRUE(spent.memory.operator_needed);
  ControllerState st;
  st.last_generation = 11;
  st.serve = ToServeRecord(spent.memory, now, unix0 + (now - p1) / std::chrono::milliseconds(1));
  ASSERT_TRUE(SaveControllerState(dir, "c", st).ok());

  // Process 2: a steady clock that started near zero, 5 minutes of wall time later.
  const TimePoint p2 = TimePoint() + seconds(40);
  const int64_t unix2 = unix0 + (now - p1) / std::chrono::milliseconds(1) + 5 * 60'000;
  absl::StatusOr<ControllerState> loaded = LoadControllerState(dir, "c");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->serve.has_value());
  EXPECT_EQ(loaded->last_generation, 11u);
  ReconcilerMemory m2 = FromServeRecord(*loaded->serve, p2, unix2);
  ASSERT_EQ(m2.restarts.size(), 3u);
  // The first attempt was 3 + 5 = 8 minutes ago.
  EXPECT_EQ(std::chrono::duration_cast<seconds>(p2 - m2.restarts[0].at).count(), 8 * 60);
  Actions a = Reconcile(d, BrokenGroup(), m2, p2);
  EXPECT_TRUE(a.Has(ActionKind::kOperatorNeeded)) << a.reason;
  EXPECT_EQ(a.memory.waiting, WaitReason::kBudgetExhausted);
  // 2.5 minutes on, the attempts are 10.5, 9.5 and 8.5 minutes old: the first has left the
  // window, and operator-needed stays until the group is seen serving.
  a = Reconcile(d, BrokenGroup(), a.memory, p2 + seconds(150));
  EXPECT_EQ(a.memory.restarts.size(), 2u);
  EXPECT_TRUE(a.Has(ActionKind::kOperatorNeeded));
  // Seen serving (an operator's `up`) clears it, in the new process too; 6 minutes on, all
  // three attempts (14, 13 and 12 minutes old) are outside the window.
  ObservedState serving = BrokenGroup();
  serving.nodes[1].state = v1::RANK_STATE_SERVING;
  a = Reconcile(d, serving, a.memory, p2 + minutes(6));
  EXPECT_FALSE(a.memory.operator_needed);
  EXPECT_TRUE(a.memory.restarts.empty()) << a.memory.restarts.size();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem::controller
