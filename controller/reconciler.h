// The reconciler of `tandemctl serve`: PURE. Given what the operator wants (DesiredSpec), what
// the agents reported this turn (ObservedState) and what the loop remembers from earlier turns
// (ReconcilerMemory), it decides the next actions. No I/O, no clock reads: time comes in as an
// argument, so every rule is tested with hand-built observations (tests/controller/reconciler_test.cc).
//
// Level-based, like a Kubernetes controller: the same inputs give the same answer, and the
// executor (serve_command.cc) feeds back what happened with Record*().
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

// What the loop carries between turns. Start from a default-constructed value.
struct ReconcilerMemory {
  // Liveness by progress: the head's iteration counter and when it last moved (or the queue
  // was empty). Unset until the first serving observation.
  std::optional<uint64_t> last_iterations;
  uint64_t progress_generation = 0;
  TimePoint last_progress{};
  std::optional<TimePoint> last_probe_at;
  bool last_probe_failed = false;
  std::string last_probe_error;
  std::optional<TimePoint> not_serving_since;  // first turn the cluster was seen not serving
  std::deque<TimePoint> restarts;              // attempt times, pruned to the window
  int consecutive_failures = 0;                // failed bring-ups since the last healthy turn
  TimePoint next_restart_at{};                 // backoff: no restart before this
  bool operator_needed = false;                // budget exhausted: stop restarting
};

enum class ActionKind {
  kNone,            // healthy (or waiting out a backoff)
  kProbe,           // run one inference probe through the head
  kRestart,         // tear the whole group down (LeaveGroup on all), then bring it up, workers first
  kLeave,           // desired down: SetServing(false) + LeaveGroup(unload) on all
  kOperatorNeeded,  // restart budget exhausted: keep reporting, change nothing
};
const char* ActionKindName(ActionKind k);

struct Actions {
  ClusterState state = ClusterState::kDown;
  std::string state_detail;          // e.g. "failed: operator needed"
  std::vector<ActionKind> actions;   // in order; empty = nothing to do
  std::string reason;                // why (for logs and the report line)
  std::optional<TimePoint> backoff_until;  // set while a restart waits for its backoff
  ReconcilerMemory memory;           // the memory for the next turn
  bool Has(ActionKind k) const;
};

Actions Reconcile(const DesiredSpec& desired, const ObservedState& observed, const ReconcilerMemory& memory,
                  TimePoint now);

// Feedback from the executor. Pure as well.
ReconcilerMemory RecordProbe(ReconcilerMemory memory, bool ok, const std::string& error, TimePoint now);
// A restart attempt (teardown + up) finished: `ok` = the group is serving again.
ReconcilerMemory RecordRestart(const DesiredSpec& desired, ReconcilerMemory memory, bool ok, TimePoint now);

// The backoff after `consecutive_failures` failed attempts: initial * 2^(n-1), capped; 0 for n = 0.
std::chrono::milliseconds BackoffFor(const DesiredSpec& desired, int consecutive_failures);

}  // namespace tandem::controller
