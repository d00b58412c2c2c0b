#include "controller/up_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "controller/cluster_ops.h"
#include "controller/preflight_command.h"

namespace tandem::controller {

std::string FormatUpJson(const absl::StatusOr<UpResult>& result, const UpTrace& trace) {
  nlohmann::json j;
  j["ok"] = result.ok();
  j["already_serving"] = result.ok() && result->already_serving;
  j["generation"] = result.ok() ? result->generation : 0;
  j["transport"] = result.ok() ? result->transport : "";
  j["api_endpoint"] = result.ok() ? result->api_endpoint : "";
  j["phases"] = nlohmann::json::array();
  for (const auto& p : trace.phases) j["phases"].push_back({{"phase", p.phase}, {"seconds", p.seconds}});
  j["total_seconds"] = trace.total_seconds;
  j["failed_phase"] = trace.failed_phase;
  j["error"] = result.ok() ? "" : StatusText(result.status());
  j["preflight"] = trace.preflight_table;
  if (trace.fabric) j["fabric"] = FabricReportJson(*trace.fabric);
  return j.dump() + "\n";
}

int RunUp(const UpCommandOptions& options) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, options.state_dir);
  if (!ctx.ok()) return ReportBadConfig(ctx.status(), options.json);
  UpOptions up;
  up.hash_weights = options.hash_weights;
  up.rehash = options.rehash;
  UpTrace trace;
  absl::StatusOr<UpResult> r = BringUp(
      *ctx, up,
      [json = options.json](const std::string& line) {
        // With --json stdout carries the one object; the progress still reaches a terminal.
        std::FILE* to = json ? stderr : stdout;
        std::fprintf(to, "%s\n", line.c_str());
        std::fflush(to);
      },
      &trace);
  if (options.json) {
    std::fputs(FormatUpJson(r, trace).c_str(), stdout);
    return r.ok() ? kExitOk : kExitChecksFailed;
  }
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
