#include "controller/up_command.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "controller/cluster_ops.h"
#include "controller/preflight_command.h"

namespace tandem::controller {

int RunUp(const UpCommandOptions& options) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, options.state_dir);
  if (!ctx.ok()) {
    std::fprintf(stderr, "tandemctl: %s\n", StatusText(ctx.status()).c_str());
    return kExitBadConfig;
  }
  UpOptions up;
  up.hash_weights = options.hash_weights;
  up.rehash = options.rehash;
  UpTrace trace;
  absl::StatusOr<UpResult> r = BringUp(
      *ctx, up,
      [](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      },
      &trace);
  std::string times;
  for (const auto& p : trace.phases) times += absl::StrFormat("%s %.2f s, ", p.phase, p.seconds);
  times += absl::StrFormat("total %.2f s", trace.total_seconds);
  if (!r.ok()) {
    if (!trace.preflight_table.empty()) std::fputs(trace.preflight_table.c_str(), stdout);
    std::printf("up FAILED in %s: %s\n%s\n", trace.failed_phase.c_str(), StatusText(r.status()).c_str(),
                times.c_str());
    return kExitChecksFailed;
  }
  std::printf("%s\nserving generation %llu (transport %s)\nAPI: http://%s/v1\n", times.c_str(),
              static_cast<unsigned long long>(r->generation), r->transport.c_str(), r->api_endpoint.c_str());
  return kExitOk;
}

}  // namespace tandem::controller
