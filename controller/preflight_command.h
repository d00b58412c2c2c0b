// `tandemctl preflight`: load the spec, observe every node in parallel, compare, print.
#pragma once

#include <chrono>
#include <string>

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

}  // namespace tandem::controller
