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

std::string FormatStatusJson(const std::vector<std::string>& agents, const ObservedState& observed,
                             const std::vector<v1::RankStatus>& raw, const std::optional<ProbeRecord>& last_probe) {
  nlohmann::json j;
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
  return j.dump(2) + "\n";
}

std::string FormatStatusTable(const std::vector<std::string>& agents, const ObservedState& observed,
                              const std::vector<v1::RankStatus>& raw, const std::optional<ProbeRecord>& last_probe) {
  std::string out = absl::StrFormat("%-14s %-22s %-12s %4s %5s %10s %10s %5s  %s\n", "NODE", "AGENT", "STATE", "RANK",
                                    "GEN", "KV_TOKENS", "ITERS", "QUEUE", "REASON");
  for (size_t i = 0; i < observed.nodes.size(); ++i) {
    const ObservedRank& n = observed.nodes[i];
    absl::StrAppendFormat(&out, "%-14s %-22s %-12s %4d %5d %10d %10d %5d  %s\n", n.name,
                          i < agents.size() ? agents[i] : "", n.reachable ? RankStateName(n.state, "unknown") : "unreachable",
                          n.rank, n.generation, n.kv_tokens, n.iterations, n.queue_depth,
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
  return out;
}

int RunStatus(const StatusCommandOptions& options) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, options.state_dir);
  if (!ctx.ok()) {
    std::fprintf(stderr, "tandemctl: %s\n", StatusText(ctx.status()).c_str());
    return kExitBadConfig;
  }
  std::vector<v1::RankStatus> raw;
  ObservedState observed = ObserveCluster(*ctx, ctx->spec.timeouts.status, &raw);
  std::optional<ProbeRecord> last_probe;
  if (auto st = LoadControllerState(ctx->state_dir, ctx->spec.name); st.ok()) last_probe = st->last_probe;
  std::vector<std::string> agents;
  for (const auto& n : ctx->spec.nodes) agents.push_back(n.agent);
  std::string text = options.json ? FormatStatusJson(agents, observed, raw, last_probe)
                                  : FormatStatusTable(agents, observed, raw, last_probe);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return ClassifyCluster(observed) == ClusterState::kServing ? kExitOk : kExitChecksFailed;
}

}  // namespace tandem::controller
