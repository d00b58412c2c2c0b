// `tandemctl status`: every node's rank state and the cluster's state. Exit 0 when serving,
// 1 otherwise (so scripts can `tandemctl status -f c.yaml && ...`), 2 for a bad cluster file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "controller/cluster_spec.h"
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

// What `serve` last wrote about recovery (the state file), judged against cluster.yaml's budget.
struct ServeSummary {
  int restart_budget = 0;
  int64_t restart_window_s = 0;
  std::vector<RestartRecord> attempts;  // counted attempts still inside the window
  bool operator_needed = false;
  std::string waiting = "none";
  std::string waiting_detail;
  int64_t waiting_since_unix_ms = 0;
};
// nullopt when serve never wrote its record.
std::optional<ServeSummary> SummarizeServe(const std::optional<ServeRecord>& record, const ServeSpec& budget,
                                           int64_t now_unix_ms);

// {"ok": serving or not, "state": ..., "detail": ..., "nodes": [{"name", "agent", "state", "reason", "rank", "generation",
//  "reachable", "kv_tokens", "state_slots", "iterations", "queue_depth", "transport", "api_endpoint",
//  "last_probe"}],
//  "serve": null | {"restart_budget", "restart_window_s", "attempts_in_window", "attempts": [{"at_unix_ms",
//  "ok", "detail"}], "operator_needed", "waiting", "waiting_detail", "waiting_since_unix_ms"}}.
// last_probe (the head's entry only; null elsewhere): {"ok", "generation", "at_unix_ms", "latency_s", "detail"}.
std::string FormatStatusJson(const std::vector<std::string>& agents, const ObservedState& observed,
                             const std::vector<v1::RankStatus>& raw, const std::optional<ProbeRecord>& last_probe,
                             const std::optional<ServeSummary>& serve = std::nullopt);
std::string FormatStatusTable(const std::vector<std::string>& agents, const ObservedState& observed,
                              const std::vector<v1::RankStatus>& raw, const std::optional<ProbeRecord>& last_probe,
                              const std::optional<ServeSummary>& serve = std::nullopt);

}  // namespace tandem::controller
