// `tandemctl status`: every node's rank state and the cluster's state. Exit 0 when serving,
// 1 otherwise (so scripts can `tandemctl status -f c.yaml && ...`), 2 for a bad cluster file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "controller/controller_state.h"
#include "controller/reconciler.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

struct StatusCommandOptions {
  std::string cluster_file = "cluster.yaml";
  std::string state_dir;
  bool json = false;
};

int RunStatus(const StatusCommandOptions& options);

// {"state": ..., "detail": ..., "nodes": [{"name", "agent", "state", "reason", "rank", "generation",
//  "reachable", "kv_tokens", "iterations", "queue_depth", "transport", "api_endpoint", "last_probe"}]}.
// last_probe (the head's entry only; null elsewhere): {"ok", "generation", "at_unix_ms", "latency_s", "detail"}.
std::string FormatStatusJson(const std::vector<std::string>& agents, const ObservedState& observed,
                             const std::vector<v1::RankStatus>& raw, const std::optional<ProbeRecord>& last_probe);
std::string FormatStatusTable(const std::vector<std::string>& agents, const ObservedState& observed,
                              const std::vector<v1::RankStatus>& raw, const std::optional<ProbeRecord>& last_probe);

}  // namespace tandem::controller
