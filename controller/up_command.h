// `tandemctl up`: bring the cluster to serving (see cluster_ops BringUp) and print each phase's
// duration. Exit 0 only when serving; 1 when a phase failed (every agent left the group);
// 2 for a bad cluster file.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "controller/cluster_ops.h"

namespace tandem::controller {

struct UpCommandOptions {
  std::string cluster_file = "cluster.yaml";
  std::string state_dir;  // "" = DefaultControllerStateDir()
  bool hash_weights = true;
  bool rehash = false;  // --rehash: the agents read every byte (as with preflight.verify: full)
  bool json = false;    // one JSON object on stdout (FormatUpJson); the phase lines go to stderr
};

int RunUp(const UpCommandOptions& options);

// {"ok", "already_serving", "generation", "transport", "api_endpoint", "phases": [{"phase", "seconds"}],
//  "total_seconds", "failed_phase", "error", "preflight"} ("preflight": the failed preflight's table, or "").
std::string FormatUpJson(const absl::StatusOr<UpResult>& result, const UpTrace& trace);

}  // namespace tandem::controller
