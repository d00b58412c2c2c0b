#include "controller/preflight_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "controller/agent_client.h"
#include "controller/agent_credentials.h"
#include "controller/cluster_spec.h"
#include "controller/control_client.h"
#include "controller/preflight.h"
#include "controller/preflight_output.h"

namespace tandem::controller {

int ReportBadConfig(const absl::Status& status, bool json) {
  const std::string text = StatusText(status);
  std::fprintf(stderr, "tandemctl: %s\n", text.c_str());
  if (json) std::printf("%s\n", nlohmann::json{{"ok", false}, {"error", text}}.dump().c_str());
  return kExitBadConfig;
}

int RunPreflight(const PreflightCommandOptions& options) {
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ClusterSpec> spec = LoadClusterSpec(options.cluster_file);
  if (!spec.ok()) return ReportBadConfig(spec.status(), options.json);
  absl::StatusOr<AgentCredentials> credentials = LoadAgentCredentials(*spec);
  if (!credentials.ok()) return ReportBadConfig(credentials.status(), options.json);
  ObserveOptions observe;
  observe.credentials = *credentials;
  observe.rehash = options.rehash || spec->preflight_verify_full;
  observe.facts_timeout = options.facts_timeout;
  observe.hash_timeout = options.hash_timeout;
  observe.hash_weights = options.hash_weights;
  std::vector<NodeObservation> observations = ObserveNodes(*spec, observe);
  PreflightReport report = ComparePreflight(*spec, observations);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string text = options.json ? FormatPreflightJson(report, wall) : FormatPreflightTable(report, wall);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return report.ok() ? kExitOk : kExitChecksFailed;
}

}  // namespace tandem::controller
