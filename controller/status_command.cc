#include "controller/status_command.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "controller/cluster_ops.h"
#include "controller/preflight_command.h"
#include "proto/rank_state.h"

namespace tandem::controller {

std::optional<ServeSummary> SummarizeServe(const std::optional<ServeRecord>& record, const ServeSpec& budget,
                                           int64_t now_unix_ms) {
  if (!record) return std::nullopt;
  ServeSummary s;
  s.restart_budget = budget.restart_budget;
  s.restart_window_s = std::chrono::duration_cast<std::chrono::seconds>(budget.restart_window).count();
  const int64_t window_ms = std::chrono::duration_cast<std::chrono::milliseconds>(budget.restart_window).count();
  for (const RestartRecord& a : record->restarts) {
    if (now_unix_ms - a.at_unix_ms < window_ms) s.attempts.push_back(a);
  }
  s.operator_needed = record->operator_needed;
  s.waiting = record->waiting;
  s.waiting_detail = record->waiting_detail;
  s.waiting_since_unix_ms = record->waiting_since_unix_ms;
  return s;
}

namespace {

// A rank's per-sequence state slots (hybrid models), from its raw GetStatus; 0 when it has none or
// did not answer.
int32_t StateSlots(const std::vector<v1::RankStatus>& raw, size_t i) {
  return i < raw.size() ? raw[i].state_slots() : 0;
}

}  // namespace

std::string FormatStatusJson(const std::vector<std::string>& agents, const ObservedState& observed,
                             const std::vector<v1::RankStatus>& raw, const std::optional<ProbeRecord>& last_probe,
                             const std::optional<ServeSummary>& serve) {
  nlohmann::json j;
  j["ok"] = ClassifyCluster(observed) == ClusterState::kServing;  // as the exit code: 0 only when serving
  j["state"] = ClusterStateName(ClassifyCluster(observed));
  j["detail"] = DescribeCluster(observed);
  j["nodes"] = nlohmann::json::array();
  for (size_t i = 0; i < observed.nodes.size(); ++i) {
    const ObservedRank& n = observed.nodes[i];
    nlohmann::json e;
    e["name"] = n.name;
    e["agent"] = i < agents.size() ? agents[i] : "";
    e["reachable"] = n.reachable;
    e["state"] = n.reachable ? RankStateName(n.state, "unknown") : "unreachable";
    e["reason"] = n.reachable ? n.reason : n.error;
    e["rank"] = n.rank;
    e["generation"] = n.generation;
    e["kv_tokens"] = n.kv_tokens;
    e["state_slots"] = StateSlots(raw, i);
    e["iterations"] = n.iterations;
    e["queue_depth"] = n.queue_depth;
    e["transport"] = i < raw.size() ? raw[i].transport() : "";
    e["api_endpoint"] = i < raw.size() ? raw[i].api_endpoint() : "";
    if (i == 0 && last_probe) {
      e["last_probe"] = {{"ok", last_probe->ok},
                         {"generation", last_probe->generation},
                         {"at_unix_ms", last_probe->at_unix_ms},
                         {"latency_s", last_probe->latency_s},
                         {"detail", last_probe->detail}};
    } else {
      e["last_probe"] = nullptr;
    }
    j["nodes"].push_back(e);
  }
  j["serve"] = nullptr;
  if (serve) {
    nlohmann::json attempts = nlohmann::json::array();
    for (const auto& a : serve->attempts) {
      attempts.push_back({{"at_unix_ms", a.at_unix_ms}, {"ok", a.ok}, {"detail", a.detail}});
    }
    j["serve"] = {{"restart_budget", serve->restart_budget},
                  {"restart_window_s", serve->restart_window_s},
                  {"attempts_in_window", serve->attempts.size()},
                  {"attempts", attempts},
                  {"operator_needed", serve->operator_needed},
                  {"waiting", serve->waiting},
                  {"waiting_detail", serve->waiting_detail},
                  {"waiting_since_unix_ms", serve->waiting_since_unix_ms}};
  }
  return j.dump(2) + "\n";
}

std::string FormatStatusTable(const std::vector<std::string>& agents, const ObservedState& observed,
                              const std::vector<v1::RankStatus>& raw, const std::optional<ProbeRecord>& last_probe,
                              const std::optional<ServeSummary>& serve) {
  std::string out = absl::StrFormat("%-14s %-22s %-12s %4s %5s %10s %11s %10s %5s  %s\n", "NODE", "AGENT", "STATE",
                                    "RANK", "GEN", "KV_TOKENS", "STATE_SLOTS", "ITERS", "QUEUE", "REASON");
  for (size_t i = 0; i < observed.nodes.size(); ++i) {
    const ObservedRank& n = observed.nodes[i];
    absl::StrAppendFormat(&out, "%-14s %-22s %-12s %4d %5d %10d %11d %10d %5d  %s\n", n.name,
                          i < agents.size() ? agents[i] : "", n.reachable ? RankStateName(n.state, "unknown") : "unreachable",
                          n.rank, n.generation, n.kv_tokens, StateSlots(raw, i), n.iterations, n.queue_depth,
                          n.reachable ? n.reason : n.error);
  }
  std::string detail = DescribeCluster(observed);
  absl::StrAppend(&out, "cluster: ", ClusterStateName(ClassifyCluster(observed)), detail.empty() ? "" : " (" + detail + ")",
                  "\n");
  if (!raw.empty() && !raw[0].api_endpoint().empty()) absl::StrAppend(&out, "API: http://", raw[0].api_endpoint(), "/v1\n");
  if (last_probe) {
    absl::StrAppendFormat(&out, "last probe: %s, generation %d, %.2f s, %s\n", last_probe->ok ? "ok" : "FAILED",
                          last_probe->generation, last_probe->latency_s, last_probe->detail);
  }
  if (serve) {
    absl::StrAppendFormat(&out, "serve: restart budget %d of %d used in the last %d s%s", serve->attempts.size(),
                          serve->restart_budget, serve->restart_window_s,
                          serve->operator_needed ? "; failed: operator needed" : "");
    if (serve->waiting != "none") {
      absl::StrAppend(&out, "; waiting: ", serve->waiting,
                      serve->waiting_detail.empty() ? "" : " (" + serve->waiting_detail + ")");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

int RunStatus(const StatusCommandOptions& options) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, options.state_dir);
  if (!ctx.ok()) return ReportBadConfig(ctx.status(), options.json);
  std::vector<v1::RankStatus> raw;
  ObservedState observed = ObserveCluster(*ctx, ctx->spec.timeouts.status, &raw);
  std::optional<ProbeRecord> last_probe;
  std::optional<ServeSummary> serve;
  if (auto st = LoadControllerState(ctx->state_dir, ctx->spec.name); st.ok()) {
    last_probe = st->last_probe;
    int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    serve = SummarizeServe(st->serve, ctx->spec.serve, now_ms);
  }
  std::vector<std::string> agents;
  for (const auto& n : ctx->spec.nodes) agents.push_back(n.agent);
  std::string text = options.json ? FormatStatusJson(agents, observed, raw, last_probe, serve)
                                  : FormatStatusTable(agents, observed, raw, last_probe, serve);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return ClassifyCluster(observed) == ClusterState::kServing ? kExitOk : kExitChecksFailed;
}

}  // namespace tandem::controller
