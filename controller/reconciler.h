// The reconciler of `tandemctl serve`: PURE. Given what the operator wants (DesiredSpec), what
// the agents reported this turn (ObservedState) and what the loop remembers from earlier turns
// (ReconcilerMemory), it decides the next actions. No I/O, no clock reads: time comes in as an
// argument, so every rule is tested with hand-built observations (tests/controller/reconciler_test.cc).
//
// Level-based, like a Kubernetes controller: the same inputs give the same answer, and the
// executor (serve_command.cc) feeds back what happened with Record*().
//
// Recovery waits instead of giving up: a restart is decided only while every agent answers
// GetStatus, and it is counted against the budget only once the executor reports a bring-up
// that followed a passing preflight (RecordRestart). An unreachable agent or a failing
// preflight makes the loop wait (and say why), never spends the budget.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

using ReconcileClock = std::chrono::steady_clock;
using TimePoint = ReconcileClock::time_point;

enum class ClusterState { kServing, kDegraded, kStarting, kDown, kFailed };
const char* ClusterStateName(ClusterState s);  // "serving" | "degraded" | "starting" | "down" | "failed"

// One agent as seen this turn (GetStatus with a short deadline).
struct ObservedRank {
  std::string name;
  bool reachable = false;
  std::string error;  // why unreachable
  v1::RankState state = v1::RANK_STATE_UNSPECIFIED;
  std::string reason;
  uint64_t generation = 0;
  int rank = -1;
  int64_t kv_tokens = 0;
  uint64_t iterations = 0;
  uint32_t queue_depth = 0;
};

struct ObservedState {
  std::vector<ObservedRank> nodes;  // nodes[0] is the head
};

// The cluster's state from one observation (also what `tandemctl status` prints):
//   failed   any reachable rank reports failed
//   serving  every rank reachable and serving, all on one generation
//   starting ranks loading/joining/ready (nothing failed, one generation)
//   down     nothing loaded: every rank idle or unreachable
//   degraded anything else (a rank lost, mixed generations, some serving but not all)
ClusterState ClassifyCluster(const ObservedState& observed);
// A one-line why for the classification ("local2 unreachable", "generations 3 and 4").
std::string DescribeCluster(const ObservedState& observed);

// Why a group that needs a restart is not being restarted right now.
enum class WaitReason {
  kNone,              // not waiting (healthy, starting within its grace, or restarting now)
  kAgentUnreachable,  // an agent does not answer GetStatus: wait for it to come back
  kPreflightFailed,   // the preflight before the last restart failed: retry it after a backoff
  kBackoff,           // a counted restart failed (or fell over): wait before the next one
  kBudgetExhausted,   // the restart budget is spent: operator needed until the group serves
};
// "none" | "agent_unreachable" | "preflight_failed" | "backoff" | "budget_exhausted"
const char* WaitReasonName(WaitReason r);
// The inverse of WaitReasonName (for the state file); kNone for an unknown name.
WaitReason ParseWaitReason(const std::string& name);

struct DesiredSpec {
  bool serving = true;  // false: leave the group everywhere
  std::chrono::milliseconds probe_interval{30000};
  std::chrono::milliseconds stuck_after{60000};     // queue > 0 and iterations flat this long
  std::chrono::milliseconds start_grace{120000};    // "starting" seen this long without us: restart
  int restart_budget = 3;                           // restarts per window ...
  std::chrono::milliseconds restart_window{600000};
  std::chrono::milliseconds backoff_initial{2000};  // doubles per consecutive failed restart
  std::chrono::milliseconds backoff_max{120000};
};

// One counted restart attempt (teardown + bring-up after a passing preflight).
struct RestartAttempt {
  TimePoint at{};      // when it started
  bool ok = false;     // the group was serving at its end
  std::string detail;  // "generation 7" or the phase and error it failed with
  bool operator==(const RestartAttempt&) const = default;
};

// What the loop carries between turns. Start from a default-constructed value, or from the
// state file (controller/serve_memory.h): the restart fields below survive a restart of serve.
struct ReconcilerMemory {
  // Liveness by progress: the head's iteration counter and when it last moved (or the queue
  // was empty). Unset until the first serving observation.
  std::optional<uint64_t> last_iterations;
  uint64_t progress_generation = 0;
  TimePoint last_progress{};
  std::optional<TimePoint> last_probe_at;
  bool last_probe_failed = false;
  uint64_t last_probe_generation = 0;  // the group the last probe went through
  std::string last_probe_error;
  std::optional<TimePoint> not_serving_since;  // first turn the cluster was seen not serving

  // Persisted (the budget and its history):
  std::deque<RestartAttempt> restarts;  // counted attempts, pruned to the window
  int consecutive_failures = 0;         // counted attempts since the last passing probe
  TimePoint next_restart_at{};          // backoff: no counted attempt before this
  int preflight_failures = 0;           // failed preflights in a row (never counted)
  TimePoint next_preflight_at{};        // no new preflight (and restart) before this
  std::string last_preflight_error;
  bool operator_needed = false;  // budget exhausted: stop restarting until the group is seen serving
  WaitReason waiting = WaitReason::kNone;  // why a needed restart is not happening now
  std::string waiting_detail;              // the one-line why ("n2 unreachable: connection refused")
  TimePoint waiting_since{};               // first turn with this reason
};

enum class ActionKind {
  kNone,            // healthy (or waiting out a backoff)
  kProbe,           // run one inference probe through the head
  kRestart,         // preflight; only if it passes, tear the group down and bring it up (workers first)
  kLeave,           // desired down: SetServing(false) + LeaveGroup(unload) on all
  kOperatorNeeded,  // restart budget exhausted: keep reporting, change nothing
};
const char* ActionKindName(ActionKind k);

struct Actions {
  ClusterState state = ClusterState::kDown;
  std::string state_detail;          // e.g. "failed: operator needed"
  std::vector<ActionKind> actions;   // in order; empty = nothing to do
  std::string reason;                // why (for logs and the report line)
  std::optional<TimePoint> backoff_until;  // set while a restart waits for a backoff (restart or preflight)
  ReconcilerMemory memory;           // the memory for the next turn
  bool Has(ActionKind k) const;
};

Actions Reconcile(const DesiredSpec& desired, const ObservedState& observed, const ReconcilerMemory& memory,
                  TimePoint now);

// Feedback from the executor. Pure as well.
// A probe through the head of `generation` finished. A failed probe asks for a restart only
// while the head is still at that generation (a manual `up` replaces the group it judged).
ReconcilerMemory RecordProbe(ReconcilerMemory memory, uint64_t generation, bool ok, const std::string& error,
                             TimePoint now);
// The preflight that precedes a restart finished. A failure is not an attempt: nothing was
// touched; the next preflight waits BackoffFor(preflight failures in a row).
ReconcilerMemory RecordPreflight(const DesiredSpec& desired, ReconcilerMemory memory, bool ok,
                                 const std::string& error, TimePoint now);
// A counted restart attempt (teardown + bring-up, begun at `started` after a passing preflight)
// finished at `now`: `ok` = the group is serving again; `detail` goes into the history.
ReconcilerMemory RecordRestart(const DesiredSpec& desired, ReconcilerMemory memory, bool ok,
                               const std::string& detail, TimePoint started, TimePoint now);

// The backoff after `consecutive_failures` failed attempts: initial * 2^(n-1), capped; 0 for n = 0.
std::chrono::milliseconds BackoffFor(const DesiredSpec& desired, int consecutive_failures);

}  // namespace tandem::controller
