// The pure reconciler over table-driven cases: hand-built observations, a fake clock, no network.
#include "controller/reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"

namespace tandem::controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const TimePoint kT0 = TimePoint() + std::chrono::hours(1);

ObservedRank Rank(const std::string& name, v1::RankState state, uint64_t gen, int rank, uint64_t iters = 0,
                  uint32_t queue = 0) {
  ObservedRank r;
  r.name = name;
  r.reachable = true;
  r.state = state;
  r.generation = gen;
  r.rank = rank;
  r.iterations = iters;
  r.queue_depth = queue;
  r.kv_tokens = 4096;
  return r;
}

ObservedState Serving(uint64_t gen = 5, uint64_t iters = 100, uint32_t queue = 0) {
  return {{Rank("head", v1::RANK_STATE_SERVING, gen, 0, iters, queue), Rank("worker", v1::RANK_STATE_SERVING, gen, 1, iters)}};
}

DesiredSpec Desired() {
  DesiredSpec d;
  d.probe_interval = seconds(30);
  d.stuck_after = seconds(20);
  d.restart_budget = 3;
  d.restart_window = std::chrono::minutes(10);
  d.backoff_initial = seconds(2);
  d.backoff_max = seconds(60);
  return d;
}

// Memory of a group that has been serving and passed a probe at kT0.
ReconcilerMemory Healthy(uint64_t iters = 100) {
  ReconcilerMemory m;
  m.last_iterations = iters;
  m.progress_generation = 5;
  m.last_progress = kT0;
  m.last_probe_at = kT0;
  return m;
}

std::string Names(const Actions& a) {
  std::string s;
  for (ActionKind k : a.actions) s += std::string(s.empty() ? "" : ",") + ActionKindName(k);
  return s.empty() ? "none" : s;
}

struct Case {
  const char* name;
  std::function<ObservedState()> observed;
  std::function<ReconcilerMemory()> memory;
  TimePoint now;
  const char* want_state;
  const char* want_actions;
  const char* want_waiting;
  bool desired_serving = true;
};

// Memory with `n` counted attempts in the last minute.
ReconcilerMemory WithAttempts(ReconcilerMemory m, int n) {
  for (int i = n; i > 0; --i) m.restarts.push_back({kT0 - seconds(10 * i), false, "failed in join"});
  return m;
}

TEST(Reconciler, TableOfCases) {
  ObservedState worker_lost = Serving();
  worker_lost.nodes[1].reachable = false;
  worker_lost.nodes[1].error = "connection refused";
  ObservedState head_lost = Serving();
  head_lost.nodes[0].reachable = false;
  head_lost.nodes[1].state = v1::RANK_STATE_FAILED;  // a worker notices its head is gone
  head_lost.nodes[0].error = "connection refused";
  ObservedState all_lost;
  all_lost.nodes.resize(2);  // default ObservedRank: not reachable
  all_lost.nodes[0].name = "head";
  all_lost.nodes[1].name = "worker";
  ObservedState worker_failed = Serving();
  worker_failed.nodes[1].state = v1::RANK_STATE_FAILED;
  worker_failed.nodes[1].reason = "peer generation changed";
  ObservedState worker_back_idle = Serving();  // the worker's agent restarted: reachable, idle
  worker_back_idle.nodes[1] = Rank("worker", v1::RANK_STATE_IDLE, 0, -1);
  ObservedState mixed = Serving();
  mixed.nodes[1].generation = 6;
  ObservedState all_idle = {{Rank("head", v1::RANK_STATE_IDLE, 0, -1), Rank("worker", v1::RANK_STATE_IDLE, 0, -1)}};
  ObservedState loading = {{Rank("head", v1::RANK_STATE_LOADING, 5, -1), Rank("worker", v1::RANK_STATE_JOINING, 5, 1)}};

  const Case cases[] = {
      {"all serving, probe not due", [] { return Serving(); }, [] { return Healthy(); }, kT0 + seconds(10), "serving",
       "none", "none"},
      {"all serving, probe due", [] { return Serving(); }, [] { return Healthy(); }, kT0 + seconds(31), "serving",
       "probe", "none"},
      {"never probed: probe now", [] { return Serving(); }, [] { return ReconcilerMemory{}; }, kT0, "serving", "probe",
       "none"},
      // Recovery waits while an agent does not answer: nothing is counted.
      {"worker unreachable: wait, not counted", [&] { return worker_lost; }, [] { return Healthy(); },
       kT0 + seconds(1), "degraded", "none", "agent_unreachable"},
      {"head unreachable: wait, not counted", [&] { return head_lost; }, [] { return Healthy(); }, kT0 + seconds(1),
       "failed", "none", "agent_unreachable"},
      {"every agent unreachable: wait", [&] { return all_lost; }, [] { return Healthy(); }, kT0, "down", "none",
       "agent_unreachable"},
      {"unreachable wins over a pending backoff", [&] { return worker_lost; },
       [] {
         ReconcilerMemory m = Healthy();
         m.next_restart_at = kT0 + seconds(30);
         return m;
       },
       kT0 + seconds(1), "degraded", "none", "agent_unreachable"},
      {"worker back, idle: restart", [&] { return worker_back_idle; }, [] { return Healthy(); }, kT0 + seconds(1),
       "degraded", "restart", "none"},
      {"worker failed", [&] { return worker_failed; }, [] { return Healthy(); }, kT0 + seconds(1), "failed", "restart",
       "none"},
      {"generation mismatch", [&] { return mixed; }, [] { return Healthy(); }, kT0 + seconds(1), "degraded", "restart",
       "none"},
      // A failed preflight is retried after its own backoff, and is not an attempt.
      {"preflight failed 1 s ago: wait", [&] { return worker_failed; },
       [] { return RecordPreflight(Desired(), Healthy(), false, "weights-parity on worker", kT0); }, kT0 + seconds(1),
       "failed", "none", "preflight_failed"},
      {"preflight backoff over: restart", [&] { return worker_failed; },
       [] { return RecordPreflight(Desired(), Healthy(), false, "weights-parity on worker", kT0); }, kT0 + seconds(2),
       "failed", "restart", "none"},
      {"counted attempt failed 1 s ago: back off", [&] { return worker_failed; },
       [] { return RecordRestart(Desired(), Healthy(), false, "failed in join", kT0 - seconds(5), kT0); },
       kT0 + seconds(1), "failed", "none", "backoff"},
      {"stuck: queue > 0, iterations flat past threshold", [] { return Serving(5, 100, 3); }, [] { return Healthy(100); },
       kT0 + seconds(21), "serving", "restart", "none"},
      {"queue > 0, flat, below threshold", [] { return Serving(5, 100, 3); }, [] { return Healthy(100); },
       kT0 + seconds(19), "serving", "none", "none"},
      {"busy but progressing", [] { return Serving(5, 250, 7); }, [] { return Healthy(100); }, kT0 + seconds(25),
       "serving", "none", "none"},
      {"idle with a flat counter is not stuck", [] { return Serving(5, 100, 0); }, [] { return Healthy(100); },
       kT0 + seconds(25), "serving", "none", "none"},
      {"probe failed", [] { return Serving(); }, [] { return RecordProbe(Healthy(), 5, false, "ids differ", kT0); },
       kT0 + seconds(1), "serving", "restart", "none"},
      {"a failed probe of an older generation is stale", [] { return Serving(6); },
       [] { return RecordProbe(Healthy(), 5, false, "ids differ", kT0); }, kT0 + seconds(1), "serving", "none",
       "none"},
      {"cluster down: bring it up", [&] { return all_idle; }, [] { return ReconcilerMemory{}; }, kT0, "down", "restart",
       "none"},
      {"starting within grace: wait", [&] { return loading; }, [] { return ReconcilerMemory{}; }, kT0, "starting",
       "none", "none"},
      {"desired down: leave", [] { return Serving(); }, [] { return Healthy(); }, kT0, "serving", "leave", "none",
       false},
      {"desired down, already down: nothing", [&] { return all_idle; }, [] { return Healthy(); }, kT0, "down", "none",
       "none", false},
      {"budget exhausted: operator needed", [&] { return worker_failed; }, [] { return WithAttempts(Healthy(), 3); },
       kT0, "failed", "operator-needed", "budget_exhausted"},
      {"budget exhausted while an agent is away", [&] { return worker_lost; },
       [] { return WithAttempts(Healthy(), 3); }, kT0, "failed", "operator-needed", "budget_exhausted"},
      {"old restarts fall out of the window", [&] { return worker_failed; },
       [] {
         ReconcilerMemory m = Healthy();
         m.restarts = {{kT0 - std::chrono::minutes(20), false, ""}, {kT0 - std::chrono::minutes(11), false, ""},
                       {kT0 - seconds(10), false, ""}};
         return m;
       },
       kT0, "failed", "restart", "none"},
      {"operator needed, still broken: stays", [&] { return worker_failed; },
       [] {
         ReconcilerMemory m = Healthy();
         m.operator_needed = true;
         return m;
       },
       kT0, "failed", "operator-needed", "budget_exhausted"},
      {"operator needed, serving with a failed probe: probe again", [] { return Serving(); },
       [] {
         ReconcilerMemory m = RecordProbe(Healthy(), 5, false, "ids differ", kT0);
         m.operator_needed = true;
         return m;
       },
       kT0 + seconds(31), "failed", "operator-needed,probe", "budget_exhausted"},
      {"operator needed clears once seen serving", [] { return Serving(); },
       [] {
         ReconcilerMemory m = WithAttempts(Healthy(), 3);
         m.operator_needed = true;
         return m;
       },
       kT0, "serving", "none", "none"},
  };
  for (const Case& c : cases) {
    DesiredSpec d = Desired();
    d.serving = c.desired_serving;
    Actions a = Reconcile(d, c.observed(), c.memory(), c.now);
    std::printf("  %-58s -> state %-9s actions %-21s waiting %-17s reason: %s\n", c.name, ClusterStateName(a.state),
                Names(a).c_str(), WaitReasonName(a.memory.waiting), a.reason.c_str());
    EXPECT_STREQ(ClusterStateName(a.state), c.want_state) << c.name;
    EXPECT_EQ(Names(a), c.want_actions) << c.name;
    EXPECT_STREQ(WaitReasonName(a.memory.waiting), c.want_waiting) << c.name;
    // Reconcile never counts an attempt (only RecordRestart does); it drops those past the window.
    const ReconcilerMemory before = c.memory();
    size_t in_window = std::count_if(before.restarts.begin(), before.restarts.end(),
                                     [&](const RestartAttempt& r) { return c.now - r.at < d.restart_window; });
    EXPECT_EQ(a.memory.restarts.size(), in_window)
        << c.name;
  }
}

TEST(Reconciler, OperatorNeededDetailAndMemory) {
  ObservedState lost = Serving();
  lost.nodes[0].reachable = false;
  ReconcilerMemory m = WithAttempts(ReconcilerMemory{}, 3);
  Actions a = Reconcile(Desired(), lost, m, kT0);
  EXPECT_EQ(a.state_detail, "failed: operator needed");
  EXPECT_TRUE(a.memory.operator_needed);
  EXPECT_NE(a.reason.find("restart budget"), std::string::npos) << a.reason;
}

// A group that keeps failing with every agent reachable: each restart waits longer (2, 4, 8 s
// ...), then the budget ends it.
TEST(Reconciler, BackoffGrowsThenBudgetStops) {
  DesiredSpec d = Desired();
  d.restart_budget = 4;
  ObservedState broken = Serving();
  broken.nodes[1].state = v1::RANK_STATE_FAILED;
  ReconcilerMemory m;
  TimePoint now = kT0;
  std::vector<double> waits;
  for (int turn = 0; turn < 200 && !m.operator_needed; ++turn) {
    Actions a = Reconcile(d, broken, m, now);
    m = a.memory;
    if (a.Has(ActionKind::kRestart)) {
      m = RecordPreflight(d, m, true, "", now);
      m = RecordRestart(d, m, /*ok=*/false, "failed in join", now, now);
      waits.push_back(std::chrono::duration<double>(m.next_restart_at - now).count());
    } else if (!a.Has(ActionKind::kOperatorNeeded)) {
      ASSERT_TRUE(a.backoff_until.has_value()) << "turn " << turn << ": " << a.reason;
      EXPECT_EQ(a.memory.waiting, WaitReason::kBackoff);
    }
    now += seconds(1);
  }
  std::printf("  backoff after each failed restart:");
  for (double w : waits) std::printf(" %.0f s", w);
  std::printf("\n");
  ASSERT_EQ(waits.size(), 4u);
  EXPECT_EQ(waits, (std::vector<double>{2, 4, 8, 16}));
  EXPECT_TRUE(m.operator_needed);
  EXPECT_EQ(m.waiting, WaitReason::kBudgetExhausted);
}

// Preflight failures back off on their own counter and never touch the budget.
TEST(Reconciler, PreflightFailuresAreNotCounted) {
  DesiredSpec d = Desired();
  ReconcilerMemory m = Healthy();
  m = RecordPreflight(d, m, false, "agent-reachable on worker", kT0);
  EXPECT_EQ(m.next_preflight_at, kT0 + seconds(2));
  m = RecordPreflight(d, m, false, "agent-reachable on worker", kT0 + seconds(2));
  EXPECT_EQ(m.next_preflight_at, kT0 + seconds(6));
  EXPECT_TRUE(m.restarts.empty());
  EXPECT_EQ(m.consecutive_failures, 0);
  EXPECT_EQ(m.waiting, WaitReason::kPreflightFailed);
  EXPECT_EQ(m.waiting_detail, "agent-reachable on worker");
  m = RecordPreflight(d, m, true, "", kT0 + seconds(6));
  EXPECT_EQ(m.preflight_failures, 0);
  EXPECT_EQ(m.next_preflight_at, TimePoint{});
}

// The reproduction, turn by turn (1 s apart) on a fake clock, with the default budget
// of 3 per 10 minutes: the worker's agent is gone for 7 s, comes back idle, the group is
// rebuilt; then the head's agent is gone for 7 s, comes back idle, rebuilt again. Before, the
// first outage spent the whole budget on attempts whose preflight could not pass.
TEST(Reconciler, SevenSecondOutagesDoNotSpendTheBudget) {
  DesiredSpec d = Desired();
  ObservedState worker_lost = Serving(5);
  worker_lost.nodes[1].reachable = false;
  ObservedState worker_idle = Serving(5);
  worker_idle.nodes[1] = Rank("worker", v1::RANK_STATE_IDLE, 0, -1);
  ObservedState head_lost = Serving(6);
  head_lost.nodes[0].reachable = false;
  head_lost.nodes[1].state = v1::RANK_STATE_FAILED;
  ObservedState head_idle = head_lost;
  head_idle.nodes[0] = Rank("head", v1::RANK_STATE_IDLE, 0, -1);
  // What the agents report each second; a restart makes the next turns serve its generation.
  ReconcilerMemory m = Healthy();
  TimePoint now = kT0;
  uint64_t generation = 5;
  int restarts = 0, waited_unreachable = 0;
  auto turn = [&](const ObservedState& observed) {
    Actions a = Reconcile(d, observed, m, now);
    m = a.memory;
    if (a.memory.waiting == WaitReason::kAgentUnreachable) ++waited_unreachable;
    if (a.Has(ActionKind::kRestart)) {
      ++restarts;
      m = RecordPreflight(d, m, true, "", now);
      m = RecordRestart(d, m, true, absl::StrCat("serving generation ", ++generation), now, now + seconds(3));
      now += seconds(3);
    }
    ASSERT_FALSE(a.Has(ActionKind::kOperatorNeeded)) << a.reason;
    now += seconds(1);
  };
  for (int s = 0; s < 7; ++s) turn(worker_lost);
  turn(worker_idle);
  for (int s = 0; s < 3; ++s) turn(Serving(6));
  for (int s = 0; s < 7; ++s) turn(head_lost);
  turn(head_idle);
  turn(Serving(7));
  std::printf("  %d turns waited for an unreachable agent, %d restarts counted\n", waited_unreachable, restarts);
  EXPECT_EQ(waited_unreachable, 14);
  EXPECT_EQ(restarts, 2);
  EXPECT_EQ(m.restarts.size(), 2u);
  EXPECT_FALSE(m.operator_needed);
  EXPECT_EQ(m.waiting, WaitReason::kNone);
}

// After a manual fix the group serves: operator-needed clears. The history stays (it is the
// budget), so the next failure inside the window is operator-needed again at once.
TEST(Reconciler, SeenServingClearsOperatorNeeded) {
  DesiredSpec d = Desired();
  ReconcilerMemory m = WithAttempts(Healthy(), 3);
  m.operator_needed = true;
  m.waiting = WaitReason::kBudgetExhausted;
  Actions a = Reconcile(d, Serving(9), m, kT0 + seconds(1));
  EXPECT_FALSE(a.memory.operator_needed);
  EXPECT_EQ(a.memory.waiting, WaitReason::kNone);
  EXPECT_EQ(a.state_detail, "serving");
  EXPECT_EQ(a.memory.restarts.size(), 3u);
  ObservedState broken = Serving(9);
  broken.nodes[1].state = v1::RANK_STATE_FAILED;
  a = Reconcile(d, broken, a.memory, kT0 + seconds(2));
  EXPECT_TRUE(a.Has(ActionKind::kOperatorNeeded));
}

TEST(Reconciler, PassingProbeResetsBackoff) {
  DesiredSpec d = Desired();
  ReconcilerMemory m;
  m.consecutive_failures = 3;
  m = RecordProbe(m, 5, true, "", kT0);
  EXPECT_EQ(m.consecutive_failures, 0);
  EXPECT_EQ(BackoffFor(d, 0), milliseconds(0));
  EXPECT_EQ(BackoffFor(d, 1), seconds(2));
  EXPECT_EQ(BackoffFor(d, 10), seconds(60));  // capped
}

TEST(Reconciler, StuckClockRestartsWhenCounterMoves) {
  // Flat for 15 s, then one step, then flat again for 15 s: never 20 s flat, never stuck.
  DesiredSpec d = Desired();
  ReconcilerMemory m = Healthy(100);
  Actions a = Reconcile(d, Serving(5, 100, 2), m, kT0 + seconds(15));
  EXPECT_FALSE(a.Has(ActionKind::kRestart));
  a = Reconcile(d, Serving(5, 101, 2), a.memory, kT0 + seconds(16));
  EXPECT_FALSE(a.Has(ActionKind::kRestart));
  a = Reconcile(d, Serving(5, 101, 2), a.memory, kT0 + seconds(31));
  EXPECT_FALSE(a.Has(ActionKind::kRestart)) << a.reason;
  a = Reconcile(d, Serving(5, 101, 2), a.memory, kT0 + seconds(37));
  EXPECT_TRUE(a.Has(ActionKind::kRestart));
  std::printf("  stuck reason: %s\n", a.reason.c_str());
}

TEST(ClassifyCluster, States) {
  EXPECT_EQ(ClassifyCluster(Serving()), ClusterState::kServing);
  ObservedState one_ready = Serving();
  one_ready.nodes[1].state = v1::RANK_STATE_READY;
  EXPECT_EQ(ClassifyCluster(one_ready), ClusterState::kDegraded);
  ObservedState unreachable;
  unreachable.nodes.resize(2);  // default ObservedRank: not reachable
  EXPECT_EQ(ClassifyCluster(unreachable), ClusterState::kDown);
  ObservedState ready = {{Rank("a", v1::RANK_STATE_READY, 3, 0), Rank("b", v1::RANK_STATE_READY, 3, 1)}};
  EXPECT_EQ(ClassifyCluster(ready), ClusterState::kStarting);
  EXPECT_EQ(DescribeCluster(ObservedState{{Rank("a", v1::RANK_STATE_SERVING, 3, 0), Rank("b", v1::RANK_STATE_SERVING, 4, 1)}}),
            "mixed generations 3 and 4");
}

}  // namespace
}  // namespace tandem::controller
