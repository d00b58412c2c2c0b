// Leaving a group: the bounded teardown of its threads (a stuck one is left behind, reported,
// and on_stuck runs), then the rank's state after it.
#include <thread>

#include "agentd/assignment.h"
#include "agentd/engine_group.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "proto/rank_state.h"

namespace tandem::agentd {

using std::chrono::milliseconds;

bool EngineHost::Teardown(const std::shared_ptr<Group>& g) {
  g->settled.store(true);  // what follows is our doing, not a failure to report
  {
    std::lock_guard<std::mutex> l(g->stop_mu);
    g->stop = true;
    g->stop_cv.notify_all();
  }
  bool clean = true;
  if (g->rank == 0 && (g->stack || g->driver)) {
    // The API port is released first and at once (never blocks), so a later group can bind it
    // even if what follows gets stuck.
    if (g->stack) g->stack->StopListening();
    // Graceful first: no new requests, the engine aborts what is in flight and releases the
    // workers (Stop); then the HTTP threads end. A stuck collective is cut by aborting the comm.
    BoundedThread stopper;
    stopper.Start([g] {
      // Failpoint "engine_shutdown_hang": the shutdown never finishes, as a collective wedged
      // in a driver would (tests of the stuck path below).
      while (FailpointEnabled("engine_shutdown_hang")) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (g->stack) {
        g->stack->Drain(milliseconds(0));
        g->stack->Stop();
      }
      if (g->driver) {
        absl::Status st = g->driver->Stop();
        if (!st.ok()) TLOG(WARN) << "releasing the workers: " << st.message();
      }
    });
    if (!stopper.JoinFor(options_.leave_deadline)) {
      TLOG(WARN) << "engine shutdown did not finish in " << options_.leave_deadline.count() << " ms: aborting the comm";
      g->Abort("leaving the group: shutdown timed out");
      if (!stopper.JoinFor(milliseconds(3000))) {
        TLOG(ERROR) << "the engine shutdown is stuck after the comm abort; the API port is released, its threads "
                       "are left behind";
        new std::shared_ptr<Group>(g);  // deliberately leaked: its threads still use it
        stopper.Detach();
        return false;
      }
    }
  }
  if (g->rank > 0 || !g->stack) g->Abort("leaving the group");
  clean = g->worker.JoinFor(options_.leave_deadline) && g->monitor.JoinFor(options_.leave_deadline) &&
          g->heartbeat.JoinFor(options_.leave_deadline);
  if (!clean) {
    TLOG(ERROR) << "a thread of generation " << g->generation << " did not stop in time; leaving it behind";
    new std::shared_ptr<Group>(g);  // deliberately leaked: its threads still use it
    return false;
  }
  if (g->loaded && g->loaded->comm) g->loaded->comm->Detach();
  return true;
}

absl::Status EngineHost::LeaveLocked(bool unload, const std::string& reason) {
  std::shared_ptr<Group> g;
  {
    std::lock_guard<std::mutex> l(mu_);
    g = group_;
  }
  bool clean = true;
  if (g) {
    TLOG(INFO) << "leaving generation " << g->generation << (reason.empty() ? "" : ": " + reason);
    clean = Teardown(g);
  }
  std::lock_guard<std::mutex> l(mu_);
  group_.reset();
  rank_ = -1;
  world_ = 0;
  kv_tokens_ = 0;
  state_slots_ = 0;
  api_endpoint_.clear();
  transport_.clear();
  if (unload) {
    group_comm_ = nullptr;
    loaded_.reset();  // a leaked group holds its own reference
  }
  if (!clean) {
    // The port is free (Teardown closed it first) and the comm aborted; what cannot be taken back
    // is the memory the stuck threads hold. A fresh process is the only clean state: say so, and
    // let on_stuck (the agent: exit so systemd restarts it) act on it.
    const std::string what = "left generation " + std::to_string(g->generation) +
                             ", but a thread of it was still stuck after the comm abort: API port released, comm "
                             "aborted, the stuck threads (and the memory they hold) left behind; " +
                             (options_.on_stuck ? "the agent exits (status 75) to start clean"
                                                : "restart the agent to reclaim that memory");
    SetStateLocked(v1::RANK_STATE_FAILED, what);
    if (options_.on_stuck) options_.on_stuck(what);
    // ABORTED, not DEADLINE_EXCEEDED: the caller's own deadline did not pass, and its message
    // (what was released, what was not) must reach the operator.
    return absl::AbortedError(what);
  }
  if (g || unload) {
    if (loaded_) {
      SetStateLocked(v1::RANK_STATE_LOADED, reason.empty() ? "left the group" : reason);
    } else {
      SetStateLocked(v1::RANK_STATE_IDLE, reason.empty() ? "unloaded" : reason);
    }
  }
  return absl::OkStatus();
}

absl::Status EngineHost::LeaveGroup(bool unload, const std::string& reason) {
  // A join in progress (waiting in the rendezvous) is called off first, so that it releases
  // the operation lock within a slice of its store wait.
  {
    std::lock_guard<std::mutex> l(mu_);
    if (group_ && state_ == v1::RANK_STATE_JOINING) {
      group_->settled.store(true);
      if (group_->cancellable) group_->cancellable->Cancel();
    }
  }
  std::unique_lock<std::timed_mutex> op(op_mu_, std::defer_lock);
  if (!op.try_lock_for(options_.leave_deadline)) {
    SetState(v1::RANK_STATE_FAILED, "leave: the operation in progress did not stop within " +
                                        std::to_string(options_.leave_deadline.count()) + " ms");
    return RankFailure(absl::DeadlineExceededError("another operation did not stop in time"));
  }
  // A teardown that left threads behind has failed the rank (LeaveLocked says what was released).
  if (absl::Status left = LeaveLocked(unload, reason.empty() ? "left the group" : "left the group: " + reason);
      !left.ok()) {
    return RankFailure(left);
  }
  if (!options_.state_dir.empty()) {
    absl::Status st = ClearAssignment(options_.state_dir);
    if (!st.ok()) TLOG(WARN) << st.message();
  }
  std::lock_guard<std::mutex> l(mu_);
  persisted_.Clear();
  if (!loaded_ && state_ != v1::RANK_STATE_IDLE) SetStateLocked(v1::RANK_STATE_IDLE, "unloaded");
  ++version_;
  changed_.notify_all();
  return absl::OkStatus();
}

}  // namespace tandem::agentd
