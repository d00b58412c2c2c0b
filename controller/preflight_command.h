// `tandemctl preflight`: load the spec, observe every node in parallel, compare, print.
#pragma once

#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace tandem::controller {

struct PreflightCommandOptions {
  std::string cluster_file = "cluster.yaml";
  bool json = false;
  bool hash_weights = true;
  bool rehash = false;  // ignore the agents' digest caches (also when cluster.yaml says preflight.verify: full)
  std::chrono::milliseconds facts_timeout{5000};
  std::chrono::milliseconds hash_timeout{30 * 60 * 1000};
};

// Exit codes: 0 all pass (warnings allowed), 1 any failure, 2 bad config.
inline constexpr int kExitOk = 0;
inline constexpr int kExitChecksFailed = 1;
inline constexpr int kExitBadConfig = 2;

int RunPreflight(const PreflightCommandOptions& options);

// A cluster file (or its credentials) that cannot be used: the message on stderr ("tandemctl: ...")
// and, for a command given --json, {"ok": false, "error": ...} on stdout, so a script that reads
// stdout always gets one object. Returns kExitBadConfig.
int ReportBadConfig(const absl::Status& status, bool json);

}  // namespace tandem::controller
