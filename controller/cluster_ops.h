// Operations on the whole cluster, shared by `up`, `down`, `status`, `probe` and `serve`:
// observe every agent, bring the group up (preflight -> plan -> load -> join -> probe ->
// serving), tear it down, and run one inference probe. These do the I/O; the decisions that
// can be pure live in cluster_plan, reconciler and preflight.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/agent_credentials.h"
#include "controller/cluster_plan.h"
#include "controller/cluster_spec.h"
#include "controller/controller_state.h"
#include "controller/reconciler.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

// The spec plus what it points to (token, TLS files, API key) and where the controller keeps its state.
struct ClusterContext {
  ClusterSpec spec;
  AgentCredentials credentials;  // auth.token_file and tls:
  std::string api_key;  // api.key_file contents ("" = open API)
  std::string state_dir;
};

// Loads cluster.yaml and the files it names. kInvalidArgument (file:line: key) for a bad spec.
absl::StatusOr<ClusterContext> LoadClusterContext(const std::string& cluster_file, const std::string& state_dir);

// Progress and result lines ("load local1: weights 3.1/12.0 MB"); called from several threads
// but serialized by the callee's caller (cluster_ops holds a lock while calling it).
using ReportLine = std::function<void(const std::string&)>;

// GetStatus on every agent in parallel with a short deadline. `raw[i]` (when given) receives
// the full RankStatus of nodes[i] (default-constructed when unreachable).
ObservedState ObserveCluster(const ClusterContext& ctx, std::chrono::milliseconds timeout,
                             std::vector<v1::RankStatus>* raw = nullptr);

struct PhaseTiming {
  std::string phase;  // "preflight", "plan", "load", "join", "probe", "serving"
  double seconds = 0;
};

struct UpResult {
  bool ok = false;
  bool already_serving = false;  // nothing was done
  std::string failed_phase;      // "" when ok
  std::string error;             // what failed where
  std::vector<PhaseTiming> phases;
  double total_seconds = 0;
  uint64_t generation = 0;
  std::string api_endpoint;  // HOST:PORT the head's API listens on
  std::string transport;     // what the JoinGroup responses reported ("gloo/tcp", "nccl/ib", ...)
  std::string preflight_table;  // the preflight table when preflight failed
};

struct UpOptions {
  bool hash_weights = true;
  bool rehash = false;  // ignore the agents' digest caches (also when cluster.yaml says preflight.verify: full)
  bool accept_serving = true;  // a cluster already serving is success (else it is torn down first)
};

// The whole bring-up. On any failure after the plan every agent leaves the group (and
// unloads), so nothing is half-alive. A failure in "preflight" has touched no agent: `serve`
// relies on that and does not count such a restart against its budget.
UpResult BringUp(const ClusterContext& ctx, const UpOptions& options, const ReportLine& report);

// SetServing(false) (when `stop_serving`) and LeaveGroup(unload) on every agent in parallel.
// Returns one entry per node: OK or why it could not be reached.
std::vector<absl::Status> TearDown(const ClusterContext& ctx, bool unload, const std::string& reason, bool stop_serving);

struct ProbeResult {
  bool ok = false;
  uint64_t generation = 0;
  double latency_s = 0;
  std::string detail;            // the answer, or what went wrong
  bool recorded_golden = false;  // this probe's ids became the generation's reference
  std::vector<int32_t> token_ids;
};

// One probe through the head (AgentControl.Generate; the agent schedules it with priority).
// With probe.expect the answer must contain it; without, the greedy ids must equal the ones
// recorded at the first successful probe of `generation` (recorded now when there are none).
// The result is saved as the last probe in the controller state file.
ProbeResult RunProbe(const ClusterContext& ctx, uint64_t generation);

}  // namespace tandem::controller
