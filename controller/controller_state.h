// What the controller remembers between runs, per cluster: the golden probe answer of each group
// generation (the greedy token ids of its first successful probe), the last probe's result and
// serve's restart budget with its history (so restarting `serve` does not reset it).
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

// One counted restart attempt of `serve`, wall-clock time.
struct RestartRecord {
  int64_t at_unix_ms = 0;
  bool ok = false;
  std::string detail;
  bool operator==(const RestartRecord&) const = default;
};

// The part of serve's reconciler memory that outlives the process (controller/serve_memory.h
// converts). Times are wall-clock milliseconds since the epoch; 0 = not set.
struct ServeRecord {
  std::vector<RestartRecord> restarts;  // counted attempts within the budget's window
  int consecutive_failures = 0;
  int64_t next_restart_unix_ms = 0;
  int preflight_failures = 0;
  int64_t next_preflight_unix_ms = 0;
  std::string last_preflight_error;
  bool operator_needed = false;
  std::string waiting = "none";  // WaitReasonName()
  std::string waiting_detail;
  int64_t waiting_since_unix_ms = 0;
  bool operator==(const ServeRecord&) const = default;
};

struct ControllerState {
  uint64_t last_generation = 0;        // the largest generation this controller planned
  uint64_t golden_generation = 0;      // generation the golden ids belong to (0 = none)
  std::vector<int32_t> golden_ids;     // greedy token ids of the first successful probe
  std::optional<ProbeRecord> last_probe;
  std::optional<ServeRecord> serve;  // written by `tandemctl serve`
};

// --state-dir default: $XDG_STATE_HOME/tandem, ~/.local/state/tandem, or /var/lib/tandem-ctl as root.
std::string DefaultControllerStateDir();

// A missing file is an empty state; a corrupt one is an error naming the file.
absl::StatusOr<ControllerState> LoadControllerState(const std::string& dir, const std::string& cluster);
absl::Status SaveControllerState(const std::string& dir, const std::string& cluster, const ControllerState& state);

std::string ControllerStatePath(const std::string& dir, const std::string& cluster);

}  // namespace tandem::controller
