#include "controller/probe_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "controller/cluster_ops.h"
#include "controller/preflight_command.h"
#include "controller/status_command.h"
#include "proto/rank_state.h"

namespace tandem::controller {
namespace {

// The probe's outcome, as a line of text or (--json) one object; the exit code.
int Report(const ProbeCommandOptions& options, const std::string& head, uint64_t generation, double latency_s,
           const absl::StatusOr<ProbeAnswer>& answer) {
  const std::string error = answer.ok() ? "" : StatusText(answer.status());
  if (options.json) {
    nlohmann::json j{{"ok", answer.ok()},        {"head", head},
                     {"generation", generation}, {"latency_s", latency_s},
                     {"detail", answer.ok() ? answer->detail : ""}, {"error", error}};
    std::printf("%s\n", j.dump().c_str());
  } else if (latency_s > 0 || answer.ok()) {
    std::printf("probe %s in %.3f s (generation %llu): %s\n", answer.ok() ? "ok" : "FAILED", latency_s,
                static_cast<unsigned long long>(generation), answer.ok() ? answer->detail.c_str() : error.c_str());
  } else {
    std::printf("probe FAILED: %s\n", error.c_str());
  }
  return answer.ok() ? kExitOk : kExitChecksFailed;
}

}  // namespace

int RunProbeCommand(const ProbeCommandOptions& options) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, options.state_dir);
  if (!ctx.ok()) return ReportBadConfig(ctx.status(), options.json);
  // The generation keys the reference answer: ask the head which group it is in.
  ObservedState observed = ObserveCluster(*ctx, ctx->spec.timeouts.status);
  const ObservedRank& head = observed.nodes[0];
  if (!head.reachable) {
    return Report(options, head.name, 0, 0,
                  absl::UnavailableError("head " + head.name + " unreachable: " + head.error));
  }
  if (head.state != v1::RANK_STATE_READY && head.state != v1::RANK_STATE_SERVING) {
    return Report(options, head.name, head.generation, 0,
                  absl::FailedPreconditionError("head " + head.name + " is not in a group (state " +
                                                RankStateName(head.state, "unknown") +
                                                (head.reason.empty() ? "" : ": " + head.reason) + ")"));
  }
  double latency_s = 0;
  absl::StatusOr<ProbeAnswer> r = RunProbe(*ctx, head.generation, &latency_s);
  return Report(options, head.name, head.generation, latency_s, r);
}

}  // namespace tandem::controller
