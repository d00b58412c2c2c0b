// EngineHost::JoinGroup: the rendezvous of one generation through the head agent's store, the
// group's comm, then the head's serving stack (engine_head.cc) or the worker's threads
// (engine_monitor.cc); the assignment is persisted for a restart to report.
#include <cstdlib>

#include "agentd/assignment.h"
#include "agentd/engine_group.h"
#include "common/log.h"
#include "common/status.h"
#include "proto/rank_state.h"

namespace tandem::agentd {

using std::chrono::milliseconds;

void EngineHost::Persist(const v1::JoinGroupRequest& req) {
  if (options_.state_dir.empty()) return;
  v1::PersistedAssignment a;
  a.set_present(true);
  a.set_model_path(loaded_->request.model_path());
  a.set_backend(loaded_->request.backend());
  a.set_served_model_name(loaded_->request.served_model_name());
  a.set_rank(req.rank());
  a.set_world_size(req.world_size());
  a.set_generation(req.generation());
  a.set_store_endpoint(req.store_endpoint());
  a.set_comm_host(req.comm_host());
  a.set_api_listen(req.api_listen());
  *a.mutable_comm_env() = req.comm_env();
  a.set_saved_unix_ms(UnixMs());
  absl::Status st = SaveAssignment(options_.state_dir, a);
  if (!st.ok()) TLOG(WARN) << "persisting the assignment: " << st.message();
  std::lock_guard<std::mutex> l(mu_);
  persisted_ = a;
}

absl::StatusOr<v1::JoinGroupResponse> EngineHost::JoinGroup(const v1::JoinGroupRequest& req) {
  const auto t0 = Clock::now();
  std::unique_lock<std::timed_mutex> op(op_mu_, std::defer_lock);
  if (!op.try_lock_for(std::chrono::seconds(2))) {
    return absl::UnavailableError("another load, join or leave is in progress");
  }
  if (!loaded_) return absl::FailedPreconditionError("no model is loaded: LoadModel first");
  const uint32_t world = loaded_->request.world_size();
  if (req.rank() != loaded_->request.rank() || std::max<uint32_t>(1, req.world_size()) != world) {
    return absl::FailedPreconditionError(
        "the model is loaded for rank " + std::to_string(loaded_->request.rank()) + " of " + std::to_string(world) +
        ", the join asks for rank " + std::to_string(req.rank()) + " of " + std::to_string(req.world_size()) +
        ": load again");
  }
  if (req.rank() > 0 && req.store_endpoint().empty()) {
    return absl::InvalidArgumentError("store_endpoint (the head agent's host:port) is required for rank > 0");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (group_ && (state_ == v1::RANK_STATE_READY || state_ == v1::RANK_STATE_SERVING)) {
      if (generation_ == req.generation()) {
        v1::JoinGroupResponse r;  // a retried JoinGroup of the same group: already in it
        r.set_kv_tokens(kv_tokens_);
        r.set_state_slots(state_slots_);
        r.set_transport(transport_);
        r.set_api_endpoint(api_endpoint_);
        return r;
      }
      return absl::FailedPreconditionError("this rank is in generation " + std::to_string(generation_) +
                                           ": leave it before joining " + std::to_string(req.generation()));
    }
  }
  // The comm environment is set process-wide (this agent hosts one rank), so only the transport's
  // own variables: any other name (LD_PRELOAD, PATH...) would reach every later subprocess.
  RETURN_IF_ERROR(CheckCommEnv(req.comm_env()));
  RETURN_IF_ERROR(LeaveLocked(false, "rejoining"));  // remnants of a failed or stopped group

  SetCommEnv(req.comm_env());

  auto g = std::make_shared<Group>();
  g->generation = req.generation();
  g->rank = static_cast<int>(req.rank());
  g->world = static_cast<int>(world);
  g->loaded = loaded_;
  engine::Store* base = options_.local_store;
  if (g->rank == 0) {
    // The head announces the generation before it rendezvouses: ranks of older groups that
    // still poll see it and abort themselves.
    if (auto cur = options_.local_store->TryGet(kGenerationKey)) {
      const uint64_t cur_gen = std::strtoull(cur->c_str(), nullptr, 10);
      if (cur_gen > req.generation()) {
        return absl::FailedPreconditionError("the store is already at generation " + *cur +
                                             ", newer than " + std::to_string(req.generation()));
      }
    }
    RETURN_IF_ERROR(options_.local_store->Set(kGenerationKey, std::to_string(req.generation())));
    options_.local_store->DropGenerationsBefore(req.generation());
  } else {
    g->remote = std::make_unique<GrpcStore>(req.store_endpoint(), options_.token, options_.store_credentials);
    base = g->remote.get();
  }
  g->cancellable = std::make_unique<CancellableStore>(*base);
  g->prefixed = std::make_unique<engine::PrefixStore>(*g->cancellable, engine::GenerationPrefix(req.generation()));
  {
    std::lock_guard<std::mutex> l(mu_);
    group_ = g;
    generation_ = req.generation();
    rank_ = g->rank;
    world_ = world;
    kv_tokens_ = 0;
    state_slots_ = 0;
    api_endpoint_.clear();
    transport_.clear();
    SetStateLocked(v1::RANK_STATE_JOINING, "rendezvous of generation " + std::to_string(req.generation()) +
                                               " through " + (g->rank == 0 ? std::string("this agent's store")
                                                                           : g->remote->Describe()));
  }
  Persist(req);

  // From here on a failure is the rank's: it leaves the group half-formed and reports failed.
  auto fail = [&](const absl::Status& st) -> absl::Status {
    const std::string msg = "join of generation " + std::to_string(req.generation()) + " failed: " + StatusText(st);
    g->settled.store(true);
    g->Abort(msg);
    Teardown(g);
    SetState(v1::RANK_STATE_FAILED, msg);
    return RankFailure(absl::Status(st.code(), msg));
  };

  if (world > 1) {
    // Gloo for cpu ranks, NCCL for cuda ranks, through the same prefixed store.
    GroupCommOptions co;
    co.backend = loaded_->request.backend();
    co.store = g->prefixed.get();
    co.rank = g->rank;
    co.world_size = g->world;
    co.comm_host = req.comm_host();
    co.connect_timeout = milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 60000);
    co.timeout = milliseconds(req.collective_timeout_ms() > 0 ? req.collective_timeout_ms() : 30000);
    auto comm = CreateGroupComm(co);
    if (!comm.ok()) return fail(comm.status());
    g->comm = std::move(*comm);
  }
  if (g->cancellable->cancelled()) return fail(absl::CancelledError("left the group during the rendezvous"));

  if (g->rank == 0) {
    absl::Status st = StartHead(*g, req);
    if (!st.ok()) return fail(st);
  } else {
    if (loaded_->comm) loaded_->comm->Attach(g->comm.get());
    g->worker.Start([this, gp = g.get()] { WorkerLoop(*gp); });
    if (options_.peer_heartbeat.count() > 0) g->heartbeat.Start([this, gp = g.get()] { HeartbeatLoop(*gp); });
  }
  g->monitor.Start([this, gp = g.get()] { MonitorLoop(*gp); });

  v1::JoinGroupResponse r;
  r.set_transport(g->comm ? g->comm->transport() : "local");
  r.set_seconds(SecondsSince(t0));
  {
    std::lock_guard<std::mutex> l(mu_);
    transport_ = r.transport();
    r.set_kv_tokens(kv_tokens_);
    r.set_state_slots(state_slots_);
    r.set_api_endpoint(api_endpoint_);
    if (!g->settled.load()) {
      SetStateLocked(v1::RANK_STATE_READY, "in generation " + std::to_string(g->generation) + " as rank " +
                                               std::to_string(g->rank) + " of " + std::to_string(g->world) + " (" +
                                               r.transport() + ")");
    }
  }
  TLOG(INFO) << "joined generation " << g->generation << " as rank " << g->rank << " of " << g->world << " in "
             << r.seconds() << " s";
  return r;
}

}  // namespace tandem::agentd
