// `tandemctl probe`: one inference probe through the head, now. Exit 0 when it passed, 1 when
// it failed (or the cluster has no head in a group), 2 for a bad cluster file.
#pragma once

#include <string>

namespace tandem::controller {

struct ProbeCommandOptions {
  std::string cluster_file = "cluster.yaml";
  std::string state_dir;
  bool json = false;  // {"ok", "head", "generation", "latency_s", "detail", "error"} on stdout
};

int RunProbeCommand(const ProbeCommandOptions& options);

}  // namespace tandem::controller
