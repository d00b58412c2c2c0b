// The failure monitor of a hosted rank's group: PURE. The monitor thread (agentd/engine_monitor.cc)
// reads the engine's health, the workers' heartbeats (through PeerWatch) and "group/generation"
// from the head's store about every 100 ms; what it saw goes in as a GroupObservation, with the
// time as a value, and DecideGroupHealth says whether the group has failed and why. No I/O and no
// clock reads here, so every rule is tested with hand-built observations
// (tests/agentd/group_monitor_test.cc), as PeerWatch and the controller's reconciler are.
//
// The rules, first match wins:
//   a failure or the leave is already recorded (settled)   -> nothing
//   the head's engine is unhealthy                         -> failed "engine failed: ..."
//   a worker's heartbeat has been silent for lost_after    -> failed "rank R lost: ..."
//   the generation key was not read this time (not due)    -> nothing
//   the head's store did not answer (ranks > 0):
//     for head_lost_after or longer                        -> failed "head lost: ... unreachable ..."
//     for less                                             -> nothing (the next poll retries)
//   the store no longer knows the generation               -> failed "head lost: ... restarted?"
//   the store holds a newer generation                     -> failed "stale generation: ..."
//   otherwise                                              -> nothing
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace tandem::agentd {

struct GroupObservation {
  using Clock = std::chrono::steady_clock;
  Clock::time_point now;
  uint64_t generation = 0;  // the group's own generation
  // A failure (or the leave) has been recorded for the group already: nothing more to report.
  bool settled = false;
  // Head: the LLMEngine failed its step (a lost rank); `engine_error` says why.
  bool engine_failed = false;
  absl::Status engine_error;
  // Head of a world > 1 with heartbeats on: the first worker whose heartbeat has not moved for
  // the watch's lost_after, and for how long (PeerWatch::Lost).
  std::optional<std::pair<int, std::chrono::milliseconds>> lost_peer;
  // The poll of "group/generation" was due and made this time; the fields below are its result.
  bool generation_read = false;
  // Ranks > 0: the head's store did not answer the read (the error), and when it last did.
  absl::Status store_error;
  Clock::time_point store_last_reached;
  std::chrono::milliseconds head_lost_after{3000};
  // What the store holds under "group/generation" (nullopt: the key is gone).
  std::optional<std::string> generation_value;
};

struct GroupVerdict {
  bool failed = false;
  std::string reason;  // set when failed
};

GroupVerdict DecideGroupHealth(const GroupObservation& o);

}  // namespace tandem::agentd
