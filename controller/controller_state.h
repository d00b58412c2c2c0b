// What the controller remembers between runs, per cluster: the golden probe answer of each group
// generation (the greedy token ids of its first successful probe) and the last probe's result.
// One JSON file per cluster in the state directory, written atomically (write, fsync, rename).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::controller {

struct ProbeRecord {
  bool ok = false;
  uint64_t generation = 0;
  int64_t at_unix_ms = 0;
  double latency_s = 0;
  std::string detail;  // the answer's text, or what went wrong
};

struct ControllerState {
  uint64_t last_generation = 0;        // the largest generation this controller planned
  uint64_t golden_generation = 0;      // generation the golden ids belong to (0 = none)
  std::vector<int32_t> golden_ids;     // greedy token ids of the first successful probe
  std::optional<ProbeRecord> last_probe;
};

// --state-dir default: $XDG_STATE_HOME/tandem, ~/.local/state/tandem, or /var/lib/tandem-ctl as root.
std::string DefaultControllerStateDir();

// A missing file is an empty state; a corrupt one is an error naming the file.
absl::StatusOr<ControllerState> LoadControllerState(const std::string& dir, const std::string& cluster);
absl::Status SaveControllerState(const std::string& dir, const std::string& cluster, const ControllerState& state);

std::string ControllerStatePath(const std::string& dir, const std::string& cluster);

}  // namespace tandem::controller
