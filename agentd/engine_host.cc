// EngineHost: the rank's state machine and what every operation shares (construction, state,
// status, serving gate, shutdown). The operations live by job in engine_load.cc, engine_join.cc,
// engine_head.cc, engine_monitor.cc, engine_teardown.cc and engine_probe.cc.
#include "agentd/engine_host.h"

#include "agentd/assignment.h"
#include "agentd/engine_group.h"
#include "common/log.h"
#include "proto/rank_state.h"

namespace tandem::agentd {

using std::chrono::milliseconds;

namespace {

// The payloads that mark a rank failure and a probe failure; their values are unused.
constexpr char kRankFailurePayload[] = "tandem.agentd/rank-failure";
constexpr char kProbeFailurePayload[] = "tandem.agentd/probe-failure";

}  // namespace

absl::Status RankFailure(absl::Status st) {
  st.SetPayload(kRankFailurePayload, absl::Cord());
  return st;
}

bool IsRankFailure(const absl::Status& st) { return st.GetPayload(kRankFailurePayload).has_value(); }

absl::Status ProbeFailure(absl::Status st) {
  st.SetPayload(kProbeFailurePayload, absl::Cord());
  return st;
}

bool IsProbeFailure(const absl::Status& st) { return st.GetPayload(kProbeFailurePayload).has_value(); }

EngineHost::EngineHost(EngineHostOptions options) : options_(std::move(options)) {
  if (!options_.state_dir.empty()) {
    auto a = LoadAssignment(options_.state_dir);
    if (!a.ok()) {
      TLOG(WARN) << a.status().message();
    } else if (a->has_value()) {
      persisted_ = **a;
      reason_ = "restarted; last assignment generation " + std::to_string(persisted_.generation()) + " rank " +
                std::to_string(persisted_.rank()) + " of " + std::to_string(persisted_.world_size()) +
                " (model " + persisted_.model_path() + "); waiting for the controller";
      TLOG(INFO) << reason_;
    }
  }
}

EngineHost::~EngineHost() { Shutdown(); }

void EngineHost::Shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutting_down_) return;
  }
  // Keep the assignment on disk: a restart (systemd) reports it and the controller decides.
  if (op_mu_.try_lock_for(options_.leave_deadline)) {
    std::shared_ptr<Group> g;
    {
      std::lock_guard<std::mutex> l(mu_);
      g = group_;
    }
    if (g) Teardown(g);
    op_mu_.unlock();
  }
  std::lock_guard<std::mutex> l(mu_);
  shutting_down_ = true;
  ++version_;
  changed_.notify_all();
}

bool EngineHost::shutting_down() const {
  std::lock_guard<std::mutex> l(mu_);
  return shutting_down_;
}

void EngineHost::SetStateLocked(v1::RankState state, const std::string& reason) {
  if (state != state_ || reason != reason_) {
    TLOG(INFO) << "rank state " << RankStateName(state_) << " -> " << RankStateName(state)
               << (reason.empty() ? "" : ": " + reason);
  }
  state_ = state;
  reason_ = reason;
  ++version_;
  changed_.notify_all();
}

void EngineHost::SetState(v1::RankState state, const std::string& reason) {
  std::lock_guard<std::mutex> l(mu_);
  SetStateLocked(state, reason);
}

v1::RankState EngineHost::state() const {
  std::lock_guard<std::mutex> l(mu_);
  return state_;
}

uint64_t EngineHost::WaitForChange(uint64_t seen, milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  changed_.wait_for(l, timeout, [&] { return version_ != seen || shutting_down_; });
  return version_;
}

v1::RankStatus EngineHost::Status() const {
  std::lock_guard<std::mutex> l(mu_);
  v1::RankStatus s;
  s.set_node_name(options_.node_name);
  s.set_state(state_);
  s.set_reason(reason_);
  s.set_generation(generation_);
  s.set_rank(rank_);
  s.set_world_size(world_);
  s.set_kv_tokens(kv_tokens_);
  s.set_state_slots(state_slots_);
  s.set_model_path(model_path_);
  s.set_api_endpoint(api_endpoint_);
  s.set_transport(transport_);
  if (group_ && group_->stack) {
    const engine::EngineStats st = group_->stack->engine().Stats();
    s.set_iterations(static_cast<uint64_t>(st.iterations));
    s.set_queue_depth(static_cast<uint32_t>(st.running + st.waiting));
  } else if (group_comm_ != nullptr) {
    s.set_iterations(group_comm_->steps());
  }
  *s.mutable_persisted() = persisted_;
  s.set_updated_unix_ms(UnixMs());
  return s;
}

absl::Status EngineHost::SetServing(bool serving) {
  std::lock_guard<std::mutex> l(mu_);
  if (serving && state_ == v1::RANK_STATE_READY) {
    SetStateLocked(v1::RANK_STATE_SERVING, "serving generation " + std::to_string(generation_));
    return absl::OkStatus();
  }
  if (!serving && state_ == v1::RANK_STATE_SERVING) {
    SetStateLocked(v1::RANK_STATE_READY, "serving stopped by the controller");
    return absl::OkStatus();
  }
  if ((serving && state_ == v1::RANK_STATE_SERVING) || (!serving && state_ == v1::RANK_STATE_READY)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(std::string("cannot ") + (serving ? "start" : "stop") + " serving: this rank is " +
                                       RankStateName(state_) + (reason_.empty() ? "" : " (" + reason_ + ")"));
}

}  // namespace tandem::agentd
