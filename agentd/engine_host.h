// The engine rank an agent hosts in-process, and its state machine:
//   idle -> loading -> loaded -> joining -> ready -> serving;  failed (with a reason) from any.
// LoadModel loads this rank's shard (the model holds a GroupComm stand-in; a cuda rank uses CUDA
// device 0 of CUDA_VISIBLE_DEVICES); JoinGroup forms the group of one generation over Gloo (cpu)
// or NCCL (cuda) (agentd/group_transport.h), rendezvousing through the head agent's store under the
// prefix "gen<generation>/" (the head uses its own RendezvousStore directly, the others a
// GrpcStore to it). Rank 0 then runs the StepDriver + LLMEngine + OpenAI server; ranks > 0 run
// RunWorkerLoop on a thread.
//
// Failure semantics (every wait has a deadline):
//  - a comm error on a worker (peer gone, collective deadline) ends its loop: failed.
//  - a worker's heartbeat (in the head's store, every peer_heartbeat) silent for peer_lost_after:
//    the head fails the group (NCCL between local GPUs does not notice a dead peer by itself).
//  - the head's engine fails its step (a lost rank): the LLMEngine fails every request at once
//    and turns unhealthy; the monitor sees it within 100 ms: failed, the comm is aborted so the
//    other ranks notice at once, /health and new requests get 503 (the server stays up).
//  - every ~1 s each rank reads "group/generation" from the head's store: a newer generation
//    (the controller moved on) makes the rank abort itself; an unreachable head store for
//    `head_lost_after`, or a store that forgot the group (head agent restarted): "head lost".
//  - LeaveGroup closes the API's listening socket first (the port is free at once), stops the
//    API and the engine, aborts the comm after a grace period if they do not stop, and joins
//    every thread with a deadline; a thread that is still stuck is left behind (with its group,
//    deliberately leaked: it shares the model, which stays alive for it), the rank reports
//    failed instead of blocking the RPC, and on_stuck runs (the agent then exits, status 75).
//
// The implementation, one job per file: engine_host.cc (state, status, serving gate, shutdown),
// engine_load.cc, engine_join.cc, engine_head.cc (rank 0's serving stack), engine_monitor.cc
// (the group's threads; the failure decision is agentd/group_monitor.h), engine_teardown.cc
// (leave), engine_probe.cc (Generate).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agentd/group_comm.h"
#include "agentd/model_roots.h"
#include "agentd/rendezvous_store.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::agentd {

struct EngineHostOptions {
  std::string node_name;
  std::string state_dir;                   // assignment.json lives here; "" = not persisted
  std::string token;                       // cluster token for the GrpcStore to the head
  // How the GrpcStore reaches the head agent (its TLS client certificate); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> store_credentials;
  const ModelRoots* model_roots = nullptr;  // LoadModel paths must lie in these; null = none (all refused)
  RendezvousStore* local_store = nullptr;  // this agent's store (served by AgentControl); required
  std::chrono::milliseconds generation_poll{1000};
  std::chrono::milliseconds head_lost_after{3000};
  std::chrono::milliseconds leave_deadline{5000};  // graceful part of a teardown, then abort
  // Workers write a heartbeat into the head's store this often; the head fails the group when
  // one is silent for peer_lost_after (0 = off). See agentd/group_transport.h.
  std::chrono::milliseconds peer_heartbeat{500};
  std::chrono::milliseconds peer_lost_after{3000};
  // Called (once per occurrence, under the state lock: it must not block) when a teardown left
  // threads behind even after the comm abort. The agent exits so that systemd starts a clean
  // process; null = report only.
  std::function<void(const std::string& what)> on_stuck;
};

// `st` (not OK) marked as a failure of the rank itself: the load, join or leave ran and failed,
// and the rank is now failed for st's message (see EngineHost::LoadModel).
absl::Status RankFailure(absl::Status st);
bool IsRankFailure(const absl::Status& st);
// `st` (not OK) marked as a probe that the engine ran and did not finish well (failed, aborted,
// out of time, its caller gone); unmarked Generate errors are refusals (nothing was submitted).
absl::Status ProbeFailure(absl::Status st);
bool IsProbeFailure(const absl::Status& st);

// "group/generation": the generation of the group the head last joined (decimal).
inline constexpr const char* kGenerationKey = "group/generation";

class EngineHost {
 public:
  using LoadProgress = std::function<void(const v1::LoadModelEvent&)>;

  explicit EngineHost(EngineHostOptions options);
  ~EngineHost();  // Shutdown()
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  // LoadModel and JoinGroup fail with a status only. A failure of the load or join itself (the
  // rank is now failed, for the status's message) is marked IsRankFailure; any other error is a
  // refusal that left the state as it was: InvalidArgument (the request), FailedPrecondition (the
  // rank's state), Unavailable (another load, join or leave holds the rank: a retry works).
  //
  // Loads on a background thread; `progress` gets phase events ("config", "weights") and, when
  // the load succeeded, a final one (done). FailedPrecondition while in a group.
  absl::Status LoadModel(const v1::LoadModelRequest& request, const LoadProgress& progress);
  // Returns once this rank is in the group (workers block in rendezvous until the head joins).
  absl::StatusOr<v1::JoinGroupResponse> JoinGroup(const v1::JoinGroupRequest& request);
  // Idempotent. Never blocks past ~2 x leave_deadline. Its failures (another operation did not
  // stop in time; a thread stuck after the comm abort) leave the rank failed: marked RankFailure.
  absl::Status LeaveGroup(bool unload, const std::string& reason);
  absl::Status SetServing(bool serving);
  // Head only (ready or serving): one greedy generation with priority. Waits up to the request's
  // timeout_ms (30 s when 0, 10 min at most); `caller_gone` (polled every 200 ms) cancels it early.
  // A probe the engine took and did not finish well is marked ProbeFailure; other errors are
  // refusals (the rank's state, the request, an engine that takes no requests).
  absl::StatusOr<v1::GenerateResponse> Generate(const v1::GenerateRequest& request,
                                                const std::function<bool()>& caller_gone = nullptr);

  v1::RankStatus Status() const;
  // Waits until the state changed after `seen` (a version from a previous call) or `timeout`;
  // returns the current version.
  uint64_t WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const;
  bool shutting_down() const;
  // Leaves the group (bounded) and wakes every watcher.
  void Shutdown();

 private:
  struct Loaded;
  struct Group;

  void SetState(v1::RankState state, const std::string& reason);
  void SetStateLocked(v1::RankState state, const std::string& reason);
  v1::RankState state() const;
  // Records a failure of `g` once (later ones and those after a leave are ignored) and aborts its comm.
  void FailGroup(Group& g, const std::string& reason);
  void MonitorLoop(Group& g);
  // A worker reads the pool sizes the head published (KV tokens, state slots); false while the KV
  // size is not there yet.
  bool LearnPoolSizes(Group& g);
  void WorkerLoop(Group& g);
  void HeartbeatLoop(Group& g);
  // Stops everything of `g`; false when a thread did not stop in time (the group is leaked).
  bool Teardown(const std::shared_ptr<Group>& g);
  // Teardown of the current group, if any; under op_mu_.
  absl::Status LeaveLocked(bool unload, const std::string& reason);
  absl::Status StartHead(Group& g, const v1::JoinGroupRequest& request);
  void Persist(const v1::JoinGroupRequest& request);

  const EngineHostOptions options_;

  std::timed_mutex op_mu_;         // serializes LoadModel / JoinGroup / LeaveGroup
  std::shared_ptr<Loaded> loaded_;  // under op_mu_ (a leaked group shares it: see Group::loaded)

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  uint64_t version_ = 1;
  v1::RankState state_ = v1::RANK_STATE_IDLE;
  std::string reason_;
  std::string model_path_;
  uint64_t generation_ = 0;
  int rank_ = -1;
  uint32_t world_ = 0;
  int64_t kv_tokens_ = 0;
  int32_t state_slots_ = 0;  // the engine's state slots (hybrid models), learned as kv_tokens_ is
  std::string api_endpoint_;
  std::string transport_;
  std::shared_ptr<Group> group_;
  GroupComm* group_comm_ = nullptr;  // of loaded_, for the worker step counter
  v1::PersistedAssignment persisted_;
  bool shutting_down_ = false;
  uint64_t next_probe_id_ = 0;
};

}  // namespace tandem::agentd
