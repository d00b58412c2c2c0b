// The controller side of the group's own collectives (docs/linktest.md "Collectives"): every rank
// of the plan gets AgentControl.CheckFabric at the same time, with the rank, world, store and comm
// environment its JoinGroup would get (so the check runs over the transport `up` would use, Gloo or
// NCCL, with the preflight's NCCL_* / GLOO_* settings), and the answers become one report: per rank
// the 4 KiB all-reduce latency (median, p99) and the large all-reduce bandwidth, plus the
// cluster's worst figures, checked against optional thresholds. Used by `tandemctl linktest`
// (after the transfers) and by `up` when cluster.yaml says `fabric_check: true` (before weights
// are loaded).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/agent_credentials.h"
#include "controller/cluster_agents.h"
#include "controller/cluster_plan.h"
#include "controller/cluster_spec.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

struct FabricCheckOptions {
  uint64_t check_id = 0;  // names the store prefix "fabric/<id>/"; 0 = the clock's unix ms
  std::chrono::milliseconds timeout{60000};             // every rank present, comm formed
  std::chrono::milliseconds collective_timeout{30000};  // each all-reduce
  // How long the timed loops may take on top of `timeout` before a call counts as unanswered.
  std::chrono::milliseconds measure_budget{120000};
  // The loops; 0 = the agent's default (4096 B x 200 after 20, 64 MiB x 10 after 2).
  uint32_t small_bytes = 0, small_iters = 0, small_warmup = 0;
  uint64_t large_bytes = 0;
  uint32_t large_iters = 0, large_warmup = 0;
  std::optional<double> min_busbw_gbps;  // every rank's busbw must reach it
  std::optional<double> max_latency_us;  // every rank's 4 KiB median must stay at or below it
};

// cluster.yaml's `fabric_check:` as options (its thresholds and timeout).
FabricCheckOptions FabricCheckOptionsFromSpec(const FabricCheckSpec& spec);

struct FabricRankReport {
  int rank = 0;
  std::string node;
  std::string agent;
  absl::Status status;                // the call's: OK, the agent's refusal or failure, unreachable
  v1::CheckFabricResponse figures;    // when status is OK
};

struct FabricReport {
  uint64_t check_id = 0;
  std::string backend;  // "cpu" | "cuda"
  std::vector<FabricRankReport> ranks;
  // Over the ranks that answered: the distinct transports (","-joined), the worst latency (the
  // highest median and p99) and the lowest bandwidths; 0 when no rank answered.
  std::string transport;
  double latency_median_us = 0;
  double latency_p99_us = 0;
  double busbw_gbps = 0;
  double algbw_gbps = 0;
  std::optional<double> min_busbw_gbps, max_latency_us;  // the thresholds it was held to
  // What failed, one line each: "n2 (rank 1): CheckFabric: unreachable ...", "n1 (rank 0): bus
  // bandwidth 0.8 GB/s is below fabric_check.min_busbw_gbps 10".
  std::vector<std::string> problems;
  double seconds = 0;
  bool ok() const { return problems.empty(); }
};

// CheckFabric on every rank of `plan` at once (each call's deadline: timeout + measure_budget).
FabricReport RunFabricCheck(const ClusterPlan& plan, ClusterAgents& agents, const FabricCheckOptions& options);

// For `linktest`: the plan `up` would make (facts-only preflight for the comm environment;
// weights are not hashed), then RunFabricCheck; a plan that cannot be made is the report's one
// problem. `credentials` reach the agents as every tandemctl call does.
FabricReport RunClusterFabricCheck(const ClusterSpec& spec, const AgentCredentials& credentials,
                                   const FabricCheckOptions& options);

// linktest's output with the collectives added: `fabric`'s table after `output`, or with `json`
// the key "collectives" added to the JSON object `output` (null when `fabric` is).
std::string WithCollectives(const std::string& output, bool json, const FabricReport* fabric);

// OK, or FailedPrecondition naming every problem ("fabric check failed: ...; ...").
absl::Status FabricVerdict(const FabricReport& report);

// The table: one line per rank, the definitions, and the result line.
std::string FormatFabricTable(const FabricReport& report);

// The same as JSON (figures per rank, the worst figures, thresholds, problems).
nlohmann::json FabricReportJson(const FabricReport& report);

}  // namespace tandem::controller
