#include "controller/probe_command.h"

#include <cstdio>

#include "common/status.h"
#include "controller/cluster_ops.h"
#include "controller/preflight_command.h"
#include "controller/status_command.h"
#include "proto/rank_state.h"

namespace tandem::controller {

int RunProbeCommand(const ProbeCommandOptions& options) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, options.state_dir);
  if (!ctx.ok()) {
    std::fprintf(stderr, "tandemctl: %s\n", StatusText(ctx.status()).c_str());
    return kExitBadConfig;
  }
  // The generation keys the reference answer: ask the head which group it is in.
  ObservedState observed = ObserveCluster(*ctx, ctx->spec.timeouts.status);
  const ObservedRank& head = observed.nodes[0];
  if (!head.reachable) {
    std::printf("probe FAILED: head %s unreachable: %s\n", head.name.c_str(), head.error.c_str());
    return kExitChecksFailed;
  }
  if (head.state != v1::RANK_STATE_READY && head.state != v1::RANK_STATE_SERVING) {
    std::printf("probe FAILED: head %s is not in a group (state %s%s)\n", head.name.c_str(), RankStateName(head.state, "unknown"),
                head.reason.empty() ? "" : (": " + head.reason).c_str());
    return kExitChecksFailed;
  }
  double latency_s = 0;
  absl::StatusOr<ProbeAnswer> r = RunProbe(*ctx, head.generation, &latency_s);
  std::printf("probe %s in %.3f s (generation %llu): %s\n", r.ok() ? "ok" : "FAILED", latency_s,
              static_cast<unsigned long long>(head.generation),
              r.ok() ? r->detail.c_str() : StatusText(r.status()).c_str());
  return r.ok() ? kExitOk : kExitChecksFailed;
}

}  // namespace tandem::controller
