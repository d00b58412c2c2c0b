// The pure reconciler over table-driven cases: hand-built observations, a fake clock, no network.
#include "controller/reconciler.h"

#include <gtest/gtest.h>

#include <functional>

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
  bool desired_serving = true;
};

TEST(Reconciler, TableOfCases) {
  ObservedState worker_lost = Serving();
  worker_lost.nodes[1].reachable = false;
  worker_lost.nodes[1].error = "connection refused";
  ObservedState worker_failed = Serving();
  worker_failed.nodes[1].state = v1::RANK_STATE_FAILED;
  worker_failed.nodes[1].reason = "peer generation changed";
  ObservedState mixed = Serving();
  mixed.nodes[1].generation = 6;
  ObservedState all_idle = {{Rank("head", v1::RANK_STATE_IDLE, 0, -1), Rank("worker", v1::RANK_STATE_IDLE, 0, -1)}};
  ObservedState loading = {{Rank("head", v1::RANK_STATE_LOADING, 5, -1), Rank("worker", v1::RANK_STATE_JOINING, 5, 1)}};

  const Case cases[] = {
      {"all serving, probe not due", [] { return Serving(); }, [] { return Healthy(); }, kT0 + seconds(10), "serving", "none"},
      {"all serving, probe due", [] { return Serving(); }, [] { return Healthy(); }, kT0 + seconds(31), "serving", "probe"},
      {"never probed: probe now", [] { return Serving(); }, [] { return ReconcilerMemory{}; }, kT0, "serving", "probe"},
      {"worker lost", [&] { return worker_lost; }, [] { return Healthy(); }, kT0 + seconds(1), "degraded", "restart"},
      {"worker failed", [&] { return worker_failed; }, [] { return Healthy(); }, kT0 + seconds(1), "failed", "restart"},
      {"generation mismatch", [&] { return mixed; }, [] { return Healthy(); }, kT0 + seconds(1), "degraded", "restart"},
      {"stuck: queue > 0, iterations flat past threshold", [] { return Serving(5, 100, 3); }, [] { return Healthy(100); },
       kT0 + seconds(21), "serving", "restart"},
      {"queue > 0, flat, below threshold", [] { return Serving(5, 100, 3); }, [] { return Healthy(100); },
       kT0 + seconds(19), "serving", "none"},
      {"busy but progressing", [] { return Serving(5, 250, 7); }, [] { return Healthy(100); }, kT0 + seconds(25),
       "serving", "none"},
      {"idle with a flat counter is not stuck", [] { return Serving(5, 100, 0); }, [] { return Healthy(100); },
       kT0 + seconds(25), "serving", "none"},
      {"probe failed", [] { return Serving(); },
       [] { return RecordProbe(Healthy(), false, "ids differ", kT0); }, kT0 + seconds(1), "serving", "restart"},
      {"cluster down: bring it up", [&] { return all_idle; }, [] { return ReconcilerMemory{}; }, kT0, "down", "restart"},
      {"starting within grace: wait", [&] { return loading; }, [] { return ReconcilerMemory{}; }, kT0, "starting", "none"},
      {"desired down: leave", [] { return Serving(); }, [] { return Healthy(); }, kT0, "serving", "leave", false},
      {"desired down, already down: nothing", [&] { return all_idle; }, [] { return Healthy(); }, kT0, "down", "none",
       false},
      {"budget exhausted", [&] { return worker_lost; },
       [] {
         ReconcilerMemory m = Healthy();
         m.restarts = {kT0 - seconds(100), kT0 - seconds(50), kT0 - seconds(10)};
         return m;
       },
       kT0, "failed", "operator-needed"},
      {"old restarts fall out of the window", [&] { return worker_lost; },
       [] {
         ReconcilerMemory m = Healthy();
         m.restarts = {kT0 - std::chrono::minutes(20), kT0 - std::chrono::minutes(11), kT0 - seconds(10)};
         return m;
       },
       kT0, "degraded", "restart"},
      {"operator needed stays", [] { return Serving(); },
       [] {
         ReconcilerMemory m = Healthy();
         m.operator_needed = true;
         return m;
       },
       kT0, "failed", "operator-needed"},
  };
  for (const Case& c : cases) {
    DesiredSpec d = Desired();
    d.serving = c.desired_serving;
    Actions a = Reconcile(d, c.observed(), c.memory(), c.now);
    std::printf("  %-50s -> state %-9s actions %-16s reason: %s\n", c.name, ClusterStateName(a.state), Names(a).c_str(),
                a.reason.c_str());
    EXPECT_STREQ(ClusterStateName(a.state), c.want_state) << c.name;
    EXPECT_EQ(Names(a), c.want_actions) << c.name;
  }
}

TEST(Reconciler, OperatorNeededDetailAndMemory) {
  ObservedState lost = Serving();
  lost.nodes[0].reachable = false;
  ReconcilerMemory m;
  m.restarts = {kT0 - seconds(3), kT0 - seconds(2), kT0 - seconds(1)};
  Actions a = Reconcile(Desired(), lost, m, kT0);
  EXPECT_EQ(a.state_detail, "failed: operator needed");
  EXPECT_TRUE(a.memory.operator_needed);
  EXPECT_NE(a.reason.find("restart budget"), std::string::npos) << a.reason;
}

// A group that keeps failing: each restart waits longer (2, 4, 8 s ...), then the budget ends it.
TEST(Reconciler, BackoffGrowsThenBudgetStops) {
  DesiredSpec d = Desired();
  d.restart_budget = 4;
  ObservedState lost = Serving();
  lost.nodes[1].reachable = false;
  ReconcilerMemory m;
  TimePoint now = kT0;
  std::vector<double> waits;
  for (int turn = 0; turn < 200 && !m.operator_needed; ++turn) {
    Actions a = Reconcile(d, lost, m, now);
    m = a.memory;
    if (a.Has(ActionKind::kRestart)) {
      m = RecordRestart(d, m, /*ok=*/false, now);
      waits.push_back(std::chrono::duration<double>(m.next_restart_at - now).count());
    } else if (!a.Has(ActionKind::kOperatorNeeded)) {
      ASSERT_TRUE(a.backoff_until.has_value()) << "turn " << turn << ": " << a.reason;
    }
    now += seconds(1);
  }
  std::printf("  backoff after each failed restart:");
  for (double w : waits) std::printf(" %.0f s", w);
  std::printf("\n");
  ASSERT_EQ(waits.size(), 4u);
  EXPECT_EQ(waits, (std::vector<double>{2, 4, 8, 16}));
  EXPECT_TRUE(m.operator_needed);
}

TEST(Reconciler, PassingProbeResetsBackoff) {
  DesiredSpec d = Desired();
  ReconcilerMemory m;
  m.consecutive_failures = 3;
  m = RecordProbe(m, true, "", kT0);
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
