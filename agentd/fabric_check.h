// The agent side of the group's own collectives (AgentControl.CheckFabric, docs/linktest.md
// "Collectives"): every rank of the would-be group forms a temporary comm over the transport `up`
// would use (Gloo for cpu, NCCL on kCudaRankDevice for cuda, with the same comm environment),
// WITHOUT a model, times small and large all-reduces, and tears the comm down.
//
// Keeping it apart from a serving group. A check is refused unless the rank is idle (a failed rank
// may still hold its weights), not merely kept under its own store prefix, because:
//  - the comm environment (NCCL_*, GLOO_*) is set process-wide, as JoinGroup does; changing it
//    under a live group would change what its next communicator sees;
//  - the figures would measure the fabric AND the serving traffic on it, and the check's 64 MiB
//    all-reduces would slow the group's decode steps;
//  - a second NCCL communicator on the serving GPU competes for its memory.
// The state is read when the check starts; a LoadModel that arrives during a check is not held off
// (the controller runs a check while no command of its own loads: linktest, or up before its load).
// It still rendezvouses under its own prefix, "fabric/<check_id>/" of the head's store, never
// "gen<g>/": a group's ranks and a check's can never read each other's addresses, and rank 0
// drops the check's keys when it is done (the store is bounded).
//
// Deadlines: every rank publishes "here/<rank>" and waits for all others first, so a rank whose
// agent was never called (or cannot reach the store) ends the check on every present rank with
// DeadlineExceeded naming it, after timeout_ms; each all-reduce has collective_timeout_ms.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agentd/rendezvous_store.h"
#include "engine/comm/comm.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::agentd {

// The two timed loops of a check (the proto's defaults; a request's 0 keeps them).
struct CollectiveLoops {
  size_t small_bytes = 4096;
  int small_iters = 200;
  int small_warmup = 20;
  size_t large_bytes = size_t{64} << 20;
  int large_iters = 10;
  int large_warmup = 2;
  // Each loop runs only the warm-ups and timed iterations that fit this budget, going by how long
  // its checked all-reduce took (warm-ups give way first; at least one is timed): a degraded link
  // (a 64 MiB all-reduce over 50 Mbit/s takes 11 s) gives its figures in about this time instead of
  // minutes. The response says how many iterations were timed.
  std::chrono::milliseconds loop_budget{20000};
};

// The loops a request asks for: its non-zero fields over the defaults. InvalidArgument beyond the
// limits (bytes a multiple of 4 in 4 B..1 GiB, iterations 1..100000, warm-ups up to 10000).
absl::StatusOr<CollectiveLoops> LoopsOf(const v1::CheckFabricRequest& request);

// Order statistics of per-iteration times: the median (the mean of the two middle values for an
// even count) and the nearest-rank 99th percentile (sorted[ceil(0.99 n) - 1]).
struct TimeSummary {
  double median = 0, p99 = 0, min = 0, max = 0;
};
TimeSummary SummarizeTimes(std::vector<double> samples);

// NCCL's bus bandwidth of an all-reduce over `world` ranks: algbw x 2(n-1)/n, the bytes each
// rank's link carried per second (ring: n-1 steps of reduce-scatter, n-1 of all-gather).
double AllReduceBusBandwidth(double algbw, int world);

// Runs the loops on `comm` (every rank calls it at the same time) and fills the figures of `out`
// (small_*, large_*; transport). Each loop first checks one all-reduce's result (rank r gives
// r + 1 everywhere, every element must be the sum) so a transport that corrupts data cannot
// report a speed. Host buffers for a plain Comm; device buffers on `comm`'s stream when it is an
// NCCL comm (its DeviceCollectives), so the figures are the fabric's, not a host copy's.
absl::Status MeasureCollectives(engine::Comm& comm, const CollectiveLoops& loops, v1::CheckFabricResponse* out);

// `st` (not OK) marked as a check that ran and failed (ControlError CHECK_FAILED), as opposed to
// a refusal that ran nothing.
absl::Status FabricCheckFailure(absl::Status st);
bool IsFabricCheckFailure(const absl::Status& st);

// "fabric/<id>": the store prefix of check `id`.
std::string FabricCheckPrefix(uint64_t check_id);

// Why a rank in `status` may not run a check ("" when it may): only an idle rank may (a failed one
// may still hold its weights and a stuck group's threads: `tandemctl down` makes it idle).
std::string FabricCheckBusyReason(const v1::RankStatus& status);

struct FabricCheckOptions {
  RendezvousStore* local_store = nullptr;  // this agent's store (rank 0 uses it); required
  std::string token;                       // to the head's store (ranks > 0)
  std::shared_ptr<grpc::ChannelCredentials> store_credentials;  // null = plaintext
  // Why this rank may not run a check now ("" = it may); null = always may.
  std::function<std::string()> busy;
  // How a rank > 0 reaches the head's store at `endpoint`; null = a GrpcStore (tests: a direct one).
  std::function<std::unique_ptr<engine::Store>(const std::string& endpoint)> remote_store;
};

class FabricCheck {
 public:
  explicit FabricCheck(FabricCheckOptions options);

  // One check of this rank; blocks until every rank took part, or the first deadline. Refusals
  // (nothing ran): InvalidArgument (the request), FailedPrecondition (busy), Unavailable (another
  // check runs on this agent). A check that ran and failed is marked IsFabricCheckFailure.
  absl::StatusOr<v1::CheckFabricResponse> Run(const v1::CheckFabricRequest& request);

 private:
  // `backend`: the request's, "cpu" when it names none.
  absl::StatusOr<v1::CheckFabricResponse> RunLocked(const v1::CheckFabricRequest& request, const std::string& backend,
                                                    const CollectiveLoops& loops);

  const FabricCheckOptions options_;
  std::mutex running_;  // one check at a time: the comm env is process-wide
};

}  // namespace tandem::agentd
