// `tandemctl down`: SetServing(false) and LeaveGroup(unload) on every agent in parallel, each
// with a deadline. Exit 0 when every agent is down; 1 when some could not be reached (named).
#pragma once

#include <string>

namespace tandem::controller {

struct DownCommandOptions {
  std::string cluster_file = "cluster.yaml";
  bool json = false;  // {"ok", "seconds", "nodes": [{"name", "agent", "down", "error"}]} on stdout
};

int RunDown(const DownCommandOptions& options);

}  // namespace tandem::controller
