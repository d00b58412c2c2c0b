// Operations on the whole cluster, shared by `up`, `down`, `status`, `probe` and `serve`:
// observe every agent, bring the group up (preflight -> plan -> load -> join -> probe ->
// serving), tear it down, and run one inference probe. These do the I/O, through
// ClusterAgents (gRPC in tandemctl, a fake in tests); the decisions that can be pure live in
// cluster_plan, reconciler and preflight.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/agent_credentials.h"
#include "controller/cluster_agents.h"
#include "controller/cluster_plan.h"
#include "controller/cluster_spec.h"
#include "controller/controller_state.h"
#include "controller/fabric_check.h"
#include "controller/reconciler.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

// The spec plus what it points to (token, TLS files, API key), where the controller keeps its
// state, and how it reaches the agents.
struct ClusterContext {
  ClusterSpec spec;
  AgentCredentials credentials;  // auth.token_file and tls:
  std::string api_key;  // api.key_file contents ("" = open API)
  std::string state_dir;
  std::shared_ptr<ClusterAgents> agents;  // gRPC with `credentials` (LoadClusterContext sets it)
};

// Loads cluster.yaml and the files it names. kInvalidArgument (file:line: key) for a bad spec.
absl::StatusOr<ClusterContext> LoadClusterContext(const std::string& cluster_file, const std::string& state_dir);

// Runs fn(i) for every i below n (every node, every rank) on its own thread and waits for all.
void ForEachNode(size_t n, const std::function<void(size_t)>& fn);

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

// How a bring-up went, whether it succeeded or not: `up` prints the times either way.
struct UpTrace {
  std::vector<PhaseTiming> phases;  // the phases that ended (a failed plan is not among them)
  double total_seconds = 0;
  std::string failed_phase;     // "" when it succeeded
  std::string preflight_table;  // the preflight table when preflight failed
  std::optional<FabricReport> fabric;  // the fabric check's, when cluster.yaml asked for one
};

// A group that serves.
struct UpResult {
  bool already_serving = false;  // nothing was done
  uint64_t generation = 0;
  std::string api_endpoint;  // HOST:PORT the head's API listens on
  std::string transport;     // what the JoinGroup responses reported ("gloo/tcp", "nccl/ib", ...)
};

// The clock a bring-up times its phases and paces its calls with; tests give it a fake one.
struct UpClock {
  std::function<std::chrono::steady_clock::time_point()> now = [] { return std::chrono::steady_clock::now(); };
  // Waits `d`, or less once `done()` holds (asked every 10 ms).
  std::function<void(std::chrono::milliseconds d, const std::function<bool()>& done)> wait =
      [](std::chrono::milliseconds d, const std::function<bool()>& done) {
        const auto until = std::chrono::steady_clock::now() + d;
        while (!done() && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      };
};

struct UpOptions {
  bool hash_weights = true;
  bool rehash = false;  // ignore the agents' digest caches (also when cluster.yaml says preflight.verify: full)
  bool accept_serving = true;  // a cluster already serving is success (else it is torn down first)
  UpClock clock;
};

// The whole bring-up: the phases below in order, each phase's time reported as it ends. The
// error says what failed where (the node names included); `trace` (when given) receives the
// phase times and the failed phase either way. On any failure after the plan every agent
// leaves the group (and unloads), so nothing is half-alive. A failure in "preflight" has
// touched no agent: `serve` relies on that and does not count such a restart against its budget.
absl::StatusOr<UpResult> BringUp(const ClusterContext& ctx, const UpOptions& options, const ReportLine& report,
                                 UpTrace* trace = nullptr);

// SetServing(false) (when `stop_serving`) and LeaveGroup(unload) on the head first (it releases
// the workers), then on the workers in parallel. Returns one entry per node: OK or why it could not
// be reached.
std::vector<absl::Status> TearDown(const ClusterContext& ctx, bool unload, const std::string& reason, bool stop_serving);

// A probe that passed.
struct ProbeAnswer {
  std::string detail;            // what matched ("greedy ids match the reference of generation 3 (8 tokens)")
  bool recorded_golden = false;  // this probe's ids became the generation's reference
  std::vector<int32_t> token_ids;
};

// One probe through the head (AgentControl.Generate; the agent schedules it with priority).
// With probe.expect the answer must contain it; without, the greedy ids must equal the ones
// recorded at the first successful probe of `generation` (recorded now when there are none).
// The error says what went wrong (a wrong answer is kDataLoss). The outcome is saved as the
// last probe in the controller state file. `latency_s` (when given) receives the Generate's
// round trip, passed or not.
absl::StatusOr<ProbeAnswer> RunProbe(const ClusterContext& ctx, uint64_t generation, double* latency_s = nullptr);

// --- The phases of BringUp, in order; exposed so a test can drive each over a fake agent. ---
// `say` may be called from several threads at once (BringUp serializes it).

// preflight: facts and weights parity on every node. Touches nothing on the agents.
PreflightReport RunPreflight(const ClusterContext& ctx, const UpOptions& options);
// OK, or kFailedPrecondition counting and naming the failed checks.
absl::Status PreflightVerdict(const PreflightReport& preflight);

// plan: every agent's state now. kUnavailable (or the RPC's code) naming the first node that
// did not answer: a group cannot be planned around a missing node.
struct ClusterNow {
  ObservedState observed;
  std::vector<v1::RankStatus> raw;  // raw[i] belongs to spec.nodes[i]
};
absl::StatusOr<ClusterNow> ObserveForUp(const ClusterContext& ctx);
// The group that is already serving, if it is.
std::optional<UpResult> AlreadyServing(const ClusterNow& now);

struct UpPlan {
  ClusterPlan plan;        // its JoinGroup requests carry timeouts.join
  bool leftovers = false;  // a previous (or failed) group is still loaded somewhere
};
// The plan of a new generation (past every agent's and the state file's), which is recorded
// in the state file before anything is loaded.
absl::StatusOr<UpPlan> PlanGroup(const ClusterContext& ctx, const ClusterNow& now, const PreflightReport& preflight);

// load: LoadModel on every rank in parallel, progress lines at most once a second per node.
// The error joins every failed node's ("local2: ...; local3: ...").
absl::Status LoadRanks(const ClusterContext& ctx, const ClusterPlan& plan, const UpClock& clock, const ReportLine& say);

// join: the workers' JoinGroup first (they block in the rendezvous until the head arrives),
// the head's 200 ms later, and not at all when a worker has failed by then (the head would
// only wait out timeouts.join for a group that cannot form).
struct JoinedGroup {
  std::string api_endpoint;  // the head's
  std::string transport;     // the distinct transports the ranks reported, joined by ','
};
absl::StatusOr<JoinedGroup> JoinRanks(const ClusterContext& ctx, const ClusterPlan& plan, const UpClock& clock,
                                      const ReportLine& say);

// probe: RunProbe, with its line ("probe: ok in 0.31 s: ...").
absl::Status ProbeGroup(const ClusterContext& ctx, uint64_t generation, const ReportLine& say);

// serving: SetServing(true) on every agent, so the head's API and /health answer.
absl::Status OpenServing(const ClusterContext& ctx);

}  // namespace tandem::controller
