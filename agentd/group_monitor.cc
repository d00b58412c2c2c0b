#include "agentd/group_monitor.h"

#include <cstdlib>

#include "common/status.h"

namespace tandem::agentd {
namespace {

GroupVerdict Fail(std::string reason) { return GroupVerdict{true, std::move(reason)}; }

}  // namespace

GroupVerdict DecideGroupHealth(const GroupObservation& o) {
  if (o.settled) return {};
  if (o.engine_failed) return Fail("engine failed: " + StatusText(o.engine_error));
  const std::string gen = std::to_string(o.generation);
  if (o.lost_peer) {
    // Aborting the comm ends the step in flight: every request fails now, not at the
    // collective's deadline (NCCL between local GPUs never sees the peer's death itself).
    return Fail("rank " + std::to_string(o.lost_peer->first) + " lost: no heartbeat for " +
                std::to_string(o.lost_peer->second.count()) + " ms (generation " + gen + ")");
  }
  if (!o.generation_read) return {};
  if (!o.store_error.ok()) {
    const double away = std::chrono::duration<double>(o.now - o.store_last_reached).count();
    if (away * 1000 >= static_cast<double>(o.head_lost_after.count())) {
      return Fail("head lost: its store has been unreachable for " + std::to_string(away) + " s (" +
                  StatusText(o.store_error) + ")");
    }
    return {};
  }
  if (!o.generation_value.has_value()) {
    return Fail("head lost: its store no longer knows generation " + gen + " (the head agent restarted?)");
  }
  const uint64_t current = std::strtoull(o.generation_value->c_str(), nullptr, 10);
  if (current > o.generation) {
    return Fail("stale generation: the group moved on to generation " + *o.generation_value + "; this rank was in " +
                gen + " and aborted itself");
  }
  return {};
}

}  // namespace tandem::agentd
