#include "controller/down_command.h"

#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "controller/cluster_ops.h"
#include "controller/preflight_command.h"

namespace tandem::controller {

int RunDown(const DownCommandOptions& options) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, "");
  if (!ctx.ok()) return ReportBadConfig(ctx.status(), options.json);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<absl::Status> results = TearDown(*ctx, /*unload=*/true, "tandemctl down", /*stop_serving=*/true);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int failed = 0;
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& node = ctx->spec.nodes[i];
    failed += !results[i].ok();
    if (options.json) {
      nodes.push_back({{"name", node.name},
                       {"agent", node.agent},
                       {"down", results[i].ok()},
                       {"error", std::string(results[i].message())}});
    } else if (results[i].ok()) {
      std::printf("%-16s %-22s down\n", node.name.c_str(), node.agent.c_str());
    } else {
      std::printf("%-16s %-22s NOT DOWN: %s\n", node.name.c_str(), node.agent.c_str(),
                  std::string(results[i].message()).c_str());
    }
  }
  if (options.json) {
    std::printf("%s\n", nlohmann::json{{"ok", failed == 0}, {"seconds", s}, {"nodes", nodes}}.dump().c_str());
    return failed ? kExitChecksFailed : kExitOk;
  }
  if (failed) {
    std::printf("%d of %zu agents could not be stopped (%.2f s)\n", failed, results.size(), s);
    return kExitChecksFailed;
  }
  std::printf("cluster down (%.2f s)\n", s);
  return kExitOk;
}

}  // namespace tandem::controller
