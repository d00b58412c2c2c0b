#include "controller/reconciler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::controller {
namespace {

bool InGroupState(v1::RankState s) {
  return s == v1::RANK_STATE_JOINING || s == v1::RANK_STATE_READY || s == v1::RANK_STATE_SERVING;
}

bool Loaded(v1::RankState s) {
  return s != v1::RANK_STATE_UNSPECIFIED && s != v1::RANK_STATE_IDLE;
}

// Generations of the ranks that are in (or joining) a group.
std::set<uint64_t> GroupGenerations(const ObservedState& observed) {
  std::set<uint64_t> gens;
  for (const auto& n : observed.nodes) {
    if (n.reachable && InGroupState(n.state)) gens.insert(n.generation);
  }
  return gens;
}

}  // namespace

const char* ClusterStateName(ClusterState s) {
  switch (s) {
    case ClusterState::kServing: return "serving";
    case ClusterState::kDegraded: return "degraded";
    case ClusterState::kStarting: return "starting";
    case ClusterState::kDown: return "down";
    case ClusterState::kFailed: return "failed";
  }
  return "unknown";
}

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kNone: return "none";
    case ActionKind::kProbe: return "probe";
    case ActionKind::kRestart: return "restart";
    case ActionKind::kLeave: return "leave";
    case ActionKind::kOperatorNeeded: return "operator-needed";
  }
  return "unknown";
}

bool Actions::Has(ActionKind k) const { return std::find(actions.begin(), actions.end(), k) != actions.end(); }

ClusterState ClassifyCluster(const ObservedState& observed) {
  if (observed.nodes.empty()) return ClusterState::kDown;
  bool any_failed = false, all_serving = true, any_loaded = false, any_starting = false, all_reachable = true;
  for (const auto& n : observed.nodes) {
    if (!n.reachable) {
      all_reachable = false;
      all_serving = false;
      continue;
    }
    if (n.state == v1::RANK_STATE_FAILED) any_failed = true;
    if (n.state != v1::RANK_STATE_SERVING) all_serving = false;
    if (Loaded(n.state)) any_loaded = true;
    if (n.state == v1::RANK_STATE_LOADING || n.state == v1::RANK_STATE_LOADED || n.state == v1::RANK_STATE_JOINING ||
        n.state == v1::RANK_STATE_READY) {
      any_starting = true;
    }
  }
  if (any_failed) return ClusterState::kFailed;
  size_t n_gens = GroupGenerations(observed).size();
  if (all_serving && n_gens == 1) return ClusterState::kServing;
  if (!any_loaded) return ClusterState::kDown;
  if (n_gens > 1 || !all_reachable) return ClusterState::kDegraded;
  // Loaded/joining/ready ranks and no serving ones: a bring-up in progress. A mix of serving
  // and not-yet-serving ranks is degraded (a serving group lost a member and it came back).
  bool any_serving = std::any_of(observed.nodes.begin(), observed.nodes.end(),
                                 [](const ObservedRank& n) { return n.reachable && n.state == v1::RANK_STATE_SERVING; });
  if (any_starting && !any_serving) return ClusterState::kStarting;
  return ClusterState::kDegraded;
}

std::string DescribeCluster(const ObservedState& observed) {
  std::vector<std::string> parts;
  for (const auto& n : observed.nodes) {
    if (!n.reachable) parts.push_back(absl::StrCat(n.name, " unreachable"));
    else if (n.state == v1::RANK_STATE_FAILED) parts.push_back(absl::StrCat(n.name, " failed: ", n.reason));
  }
  std::set<uint64_t> gens = GroupGenerations(observed);
  if (gens.size() > 1) parts.push_back(absl::StrCat("mixed generations ", absl::StrJoin(gens, " and ")));
  return absl::StrJoin(parts, "; ");
}

std::chrono::milliseconds BackoffFor(const DesiredSpec& desired, int consecutive_failures) {
  if (consecutive_failures <= 0) return std::chrono::milliseconds(0);
  std::chrono::milliseconds b = desired.backoff_initial;
  for (int i = 1; i < consecutive_failures && b < desired.backoff_max; ++i) b *= 2;
  return std::min(b, desired.backoff_max);
}

namespace {

void SetWaiting(ReconcilerMemory& mem, WaitReason reason, std::string detail, TimePoint now) {
  if (mem.waiting != reason) mem.waiting_since = now;
  mem.waiting = reason;
  mem.waiting_detail = reason == WaitReason::kNone ? std::string() : std::move(detail);
}

std::string Seconds(std::chrono::steady_clock::duration d) {
  return absl::StrCat(std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0, " s");
}

// The agents that did not answer this turn, with why ("n2 (connection refused)").
std::string UnreachableAgents(const ObservedState& observed) {
  std::vector<std::string> names;
  for (const auto& n : observed.nodes) {
    if (!n.reachable) names.push_back(n.error.empty() ? n.name : absl::StrCat(n.name, " (", n.error, ")"));
  }
  return absl::StrJoin(names, ", ");
}

bool ProbeDue(const DesiredSpec& desired, const ReconcilerMemory& mem, TimePoint now) {
  return !mem.last_probe_at || now - *mem.last_probe_at >= desired.probe_interval;
}

// A restart is needed for `restart_reason`. In this order: the budget (spent = operator
// needed), every agent reachable, the backoff of counted attempts, the backoff of failed
// preflights; only then a restart. Nothing here counts an attempt: RecordRestart does.
void DecideRestart(const DesiredSpec& desired, const ObservedState& observed, const std::string& restart_reason,
                   bool serving, TimePoint now, Actions& out) {
  ReconcilerMemory& mem = out.memory;
  if (mem.operator_needed || static_cast<int>(mem.restarts.size()) >= desired.restart_budget) {
    mem.operator_needed = true;
    out.state = ClusterState::kFailed;
    out.state_detail = "failed: operator needed";
    out.actions.push_back(ActionKind::kOperatorNeeded);
    // Probes change nothing, and a passing one is how a fix by hand is noticed.
    if (serving && ProbeDue(desired, mem, now)) out.actions.push_back(ActionKind::kProbe);
    std::string budget = absl::StrCat("restart budget of ", desired.restart_budget, " per ",
                                      std::chrono::duration_cast<std::chrono::seconds>(desired.restart_window).count(),
                                      " s exhausted");
    out.reason = absl::StrCat(restart_reason, " (", budget, ")");
    SetWaiting(mem, WaitReason::kBudgetExhausted, budget, now);
    return;
  }
  if (std::string lost = UnreachableAgents(observed); !lost.empty()) {
    out.reason = absl::StrCat(restart_reason, " (waiting for ", lost, " to answer; not counted as a restart)");
    SetWaiting(mem, WaitReason::kAgentUnreachable, absl::StrCat("unreachable: ", lost), now);
    return;
  }
  if (now < mem.next_restart_at) {
    out.backoff_until = mem.next_restart_at;
    out.reason = absl::StrCat(restart_reason, " (backing off ", Seconds(mem.next_restart_at - now), ")");
    SetWaiting(mem, WaitReason::kBackoff,
               absl::StrCat(mem.consecutive_failures, " restart(s) since the last passing probe"), now);
    return;
  }
  if (now < mem.next_preflight_at) {
    out.backoff_until = mem.next_preflight_at;
    out.reason = absl::StrCat(restart_reason, " (preflight failed: ", mem.last_preflight_error, "; retrying in ",
                              Seconds(mem.next_preflight_at - now), ")");
    SetWaiting(mem, WaitReason::kPreflightFailed, mem.last_preflight_error, now);
    return;
  }
  out.actions.push_back(ActionKind::kRestart);
  out.reason = restart_reason;
  SetWaiting(mem, WaitReason::kNone, "", now);
}

}  // namespace

const char* WaitReasonName(WaitReason r) {
  switch (r) {
    case WaitReason::kNone: return "none";
    case WaitReason::kAgentUnreachable: return "agent_unreachable";
    case WaitReason::kPreflightFailed: return "preflight_failed";
    case WaitReason::kBackoff: return "backoff";
    case WaitReason::kBudgetExhausted: return "budget_exhausted";
  }
  return "none";
}

WaitReason ParseWaitReason(const std::string& name) {
  for (WaitReason r : {WaitReason::kAgentUnreachable, WaitReason::kPreflightFailed, WaitReason::kBackoff,
                       WaitReason::kBudgetExhausted}) {
    if (name == WaitReasonName(r)) return r;
  }
  return WaitReason::kNone;
}

Actions Reconcile(const DesiredSpec& desired, const ObservedState& observed, const ReconcilerMemory& memory,
                  TimePoint now) {
  Actions out;
  out.memory = memory;
  ReconcilerMemory& mem = out.memory;
  out.state = ClassifyCluster(observed);
  out.state_detail = ClusterStateName(out.state);
  // Attempts older than the window no longer count against the budget.
  while (!mem.restarts.empty() && now - mem.restarts.front().at >= desired.restart_window) mem.restarts.pop_front();

  if (!desired.serving) {
    SetWaiting(mem, WaitReason::kNone, "", now);
    bool anything_up = std::any_of(observed.nodes.begin(), observed.nodes.end(),
                                   [](const ObservedRank& n) { return n.reachable && Loaded(n.state); });
    if (anything_up) {
      out.actions.push_back(ActionKind::kLeave);
      out.reason = "desired state is down";
    }
    return out;
  }

  // Why the group must be rebuilt, if it must.
  std::string restart_reason;
  const bool serving = out.state == ClusterState::kServing;
  if (serving) {
    mem.not_serving_since.reset();
    const ObservedRank& head = observed.nodes[0];
    // Liveness by progress: stuck only when work is queued and the counter is flat.
    bool moved = !mem.last_iterations || *mem.last_iterations != head.iterations ||
                 mem.progress_generation != head.generation;
    if (moved || head.queue_depth == 0) {
      mem.last_iterations = head.iterations;
      mem.progress_generation = head.generation;
      mem.last_progress = now;
    } else if (now - mem.last_progress >= desired.stuck_after) {
      restart_reason = absl::StrCat("stuck: ", head.queue_depth, " requests queued and the iteration counter at ",
                                    head.iterations, " for ",
                                    std::chrono::duration_cast<std::chrono::seconds>(now - mem.last_progress).count(),
                                    " s");
    }
    if (restart_reason.empty() && mem.last_probe_failed && mem.last_probe_generation == head.generation) {
      restart_reason = absl::StrCat("probe failed: ", mem.last_probe_error);
    }
    if (restart_reason.empty()) {
      // Seen serving: whatever went wrong before is over, an operator's fix included.
      mem.operator_needed = false;
      mem.preflight_failures = 0;
      mem.next_preflight_at = TimePoint{};
      mem.last_preflight_error.clear();
      SetWaiting(mem, WaitReason::kNone, "", now);
      // The agent schedules probes with priority, so a due probe never waits for a busy queue
      // and never counts against a busy healthy engine.
      if (ProbeDue(desired, mem, now)) {
        out.actions.push_back(ActionKind::kProbe);
        out.reason = "probe due";
      }
      return out;
    }
  } else if (out.state == ClusterState::kStarting) {
    // Someone else (a concurrent `up`) may be bringing the group up: give it time.
    if (!mem.not_serving_since) mem.not_serving_since = now;
    if (now - *mem.not_serving_since < desired.start_grace) {
      out.reason = "starting";
      SetWaiting(mem, WaitReason::kNone, "", now);
      return out;
    }
    restart_reason = "starting for too long";
  } else {
    if (!mem.not_serving_since) mem.not_serving_since = now;
    std::string why = DescribeCluster(observed);
    restart_reason = absl::StrCat(out.state_detail, why.empty() ? "" : ": " + why);
  }
  DecideRestart(desired, observed, restart_reason, serving, now, out);
  return out;
}

ReconcilerMemory RecordProbe(ReconcilerMemory memory, uint64_t generation, bool ok, const std::string& error,
                             TimePoint now) {
  memory.last_probe_at = now;
  memory.last_probe_failed = !ok;
  memory.last_probe_generation = generation;
  memory.last_probe_error = ok ? "" : error;
  if (ok) memory.consecutive_failures = 0;  // healthy: the next failure starts a fresh backoff
  return memory;
}

ReconcilerMemory RecordPreflight(const DesiredSpec& desired, ReconcilerMemory memory, bool ok,
                                 const std::string& error, TimePoint now) {
  if (ok) {
    memory.preflight_failures = 0;
    memory.next_preflight_at = TimePoint{};
    memory.last_preflight_error.clear();
    return memory;
  }
  ++memory.preflight_failures;
  memory.next_preflight_at = now + BackoffFor(desired, memory.preflight_failures);
  memory.last_preflight_error = error;
  SetWaiting(memory, WaitReason::kPreflightFailed, error, now);
  return memory;
}

ReconcilerMemory RecordRestart(const DesiredSpec& desired, ReconcilerMemory memory, bool ok,
                               const std::string& detail, TimePoint started, TimePoint now) {
  memory.restarts.push_back(RestartAttempt{started, ok, detail});
  ++memory.consecutive_failures;
  // The next restart waits by the number of attempts since the last passing probe, whether
  // this one came up or not: a group that comes up and falls over again backs off too.
  memory.next_restart_at = now + BackoffFor(desired, memory.consecutive_failures);
  memory.last_iterations.reset();
  memory.last_probe_failed = false;
  memory.last_probe_error.clear();
  // `up` probes before it opens the API: a successful restart counts as a fresh probe.
  if (ok) memory.last_probe_at = now;
  else memory.last_probe_at.reset();
  memory.not_serving_since.reset();
  return memory;
}

}  // namespace tandem::controller
