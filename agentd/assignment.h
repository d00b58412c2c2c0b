// The agent's assignment in --state-dir/assignment.json: what the controller last told it to
// be (model, backend, rank, world, generation, store endpoint, API address). Written atomically
// (temporary file, fsync, rename, fsync of the directory) at JoinGroup and removed at
// LeaveGroup, so a crash leaves either the old or the new file, never half of one.
//
// At start the agent reads it back and reports it (RankStatus.persisted, reason "restarted;
// last assignment generation N rank R"), but it does not rejoin on its own: its peers may have
// moved on to a newer generation, and only the controller knows. The controller's `up` /
// `serve` uses the report to bring the node back (load, join with a new generation).
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::agentd {

std::string AssignmentPath(const std::string& state_dir);

// Writes `a` (present is forced true). FailedPrecondition naming the file on an I/O error.
absl::Status SaveAssignment(const std::string& state_dir, const v1::PersistedAssignment& a);
// nullopt when there is no file; InvalidArgument (file named) when it cannot be parsed.
absl::StatusOr<std::optional<v1::PersistedAssignment>> LoadAssignment(const std::string& state_dir);
// Removes the file (absent is fine).
absl::Status ClearAssignment(const std::string& state_dir);

}  // namespace tandem::agentd
