// `tandemctl serve`: the long-running controller. Every turn (~1 s): observe every agent
// (GetStatus, short deadline) -> Reconcile (pure) -> execute (probe, restart the whole group
// workers first, leave). A restart is counted against the budget only after its preflight
// passed; the budget and its history live in the controller state file, so a restart of
// `serve` continues where the last one stopped. SIGTERM/SIGINT end it cleanly and leave the
// cluster as it is.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

namespace tandem::controller {

struct ServeCommandOptions {
  std::string cluster_file = "cluster.yaml";
  std::string state_dir;
  std::string metrics_listen;  // overrides serve.metrics_listen
  std::chrono::milliseconds loop_interval{1000};
  bool hash_weights = true;  // preflight of each restart hashes the weights (cached by mtime)
};

// Runs until *stop becomes true. Exit 0 after a clean stop, 2 for a bad cluster file or an
// unusable metrics address.
int RunServe(const ServeCommandOptions& options, const std::atomic<bool>* stop);

}  // namespace tandem::controller
