// What differs between a cpu rank and a cuda rank hosted by an agent: the device it runs on, the
// comm its group uses, and how a dead peer is noticed.
//
// Device: a cuda rank always uses CUDA device 0 of what the agent's process sees, i.e. the first
// entry of CUDA_VISIBLE_DEVICES. Several agents on one machine (one per GPU) are each started
// with their own CUDA_VISIBLE_DEVICES=<index or GPU-uuid>; an agent never picks a GPU itself.
// Comm: cpu ranks form the group over Gloo (TCP); cuda ranks over NCCL (engine/cuda/nccl_comm.h),
// rendezvousing through the same store (key "nccl_unique_id" under the generation prefix).
// Dead peers: Gloo sees a closed TCP connection at once; NCCL between GPUs of one host (P2P/SHM)
// does not, a collective just never completes until its deadline. So every worker writes a
// heartbeat counter into the head's store and the head fails the group when one stops moving
// (PeerWatch): a kill -9'd worker ends the head's in-flight requests in ~peer_lost_after.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/comm/comm.h"
#include "engine/comm/store.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::agentd {

// The CUDA device of an agent-hosted cuda rank (see above).
inline constexpr int kCudaRankDevice = 0;

// True when this build has the cuda backend (TANDEM_HAVE_CUDA).
bool BuildHasCuda();

// For backend "cuda": checks that this build has CUDA and that a device is visible, makes
// kCudaRankDevice current on the calling thread, and returns a description for logs
// ("CUDA device 0 of CUDA_VISIBLE_DEVICES=1: NVIDIA H200, 139.8 GiB"). "" for other backends.
// FailedPrecondition with a clear text otherwise ("this build has no CUDA", "no CUDA device
// visible (CUDA_VISIBLE_DEVICES=...)").
absl::StatusOr<std::string> PrepareRankDevice(const std::string& backend);

// The value of CUDA_VISIBLE_DEVICES ("" when unset: every GPU is visible).
std::string CudaVisibleDevices();

struct GroupCommOptions {
  std::string backend = "cpu";
  int rank = 0;
  int world_size = 1;
  engine::Store* store = nullptr;        // prefixed with the generation; not owned
  std::string comm_host = "127.0.0.1";   // Gloo: address or interface to bind
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds timeout{30000};  // each collective
};

// Gloo for cpu, NCCL on kCudaRankDevice for cuda (FailedPrecondition in a build without CUDA).
absl::StatusOr<std::unique_ptr<engine::Comm>> CreateGroupComm(const GroupCommOptions& options);

// NCCL_* or GLOO_* followed by upper-case letters, digits and '_': the transport's variables, the
// only names a JoinGroup or CheckFabric may set in the agent's environment (process-wide: any
// other name, LD_PRELOAD or PATH, would reach every later subprocess).
bool IsCommEnvName(const std::string& name);
// Every name of `env` passes IsCommEnvName: InvalidArgument naming the first that does not.
absl::Status CheckCommEnv(const v1::CommEnv& env);
// Sets `env` in the agent's environment, process-wide (after CheckCommEnv).
void SetCommEnv(const v1::CommEnv& env);

// Store key of rank `rank`'s heartbeat counter in generation `generation`'s group.
std::string HeartbeatKey(uint64_t generation, int rank);

// The head's view of its workers' heartbeats (pure; the caller reads the store and the clock).
// A rank counts as alive from the watch's start; it is lost when its value has not changed for
// `lost_after` (a missing key counts as an unchanged value).
class PeerWatch {
 public:
  using Clock = std::chrono::steady_clock;
  PeerWatch(int world_size, std::chrono::milliseconds lost_after, Clock::time_point start);
  // Records what the store holds for `rank` (1..world-1) at `now`.
  void Observe(int rank, const std::optional<std::string>& value, Clock::time_point now);
  // The first lost rank and for how long it has been silent, or nullopt.
  std::optional<std::pair<int, std::chrono::milliseconds>> Lost(Clock::time_point now) const;

 private:
  std::chrono::milliseconds lost_after_;
  std::vector<std::optional<std::string>> last_value_;
  std::vector<Clock::time_point> last_change_;
};

}  // namespace tandem::agentd
