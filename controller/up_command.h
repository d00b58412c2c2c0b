// `tandemctl up`: bring the cluster to serving (see cluster_ops BringUp) and print each phase's
// duration. Exit 0 only when serving; 1 when a phase failed (every agent left the group);
// 2 for a bad cluster file.
#pragma once

#include <string>

namespace tandem::controller {

struct UpCommandOptions {
  std::string cluster_file = "cluster.yaml";
  std::string state_dir;  // "" = DefaultControllerStateDir()
  bool hash_weights = true;
  bool rehash = false;  // --rehash: the agents read every byte (as with preflight.verify: full)
};

int RunUp(const UpCommandOptions& options);

}  // namespace tandem::controller
