// The threads of a group in progress: the worker's step loop, its heartbeat to the head, and the
// monitor that fails the group (the decision is DecideGroupHealth, agentd/group_monitor.h).
#include <cstdlib>

#include "agentd/assignment.h"
#include "agentd/engine_group.h"
#include "agentd/group_monitor.h"
#include "common/log.h"
#include "common/status.h"
#include "proto/rank_state.h"

namespace tandem::agentd {

using std::chrono::milliseconds;

void EngineHost::WorkerLoop(Group& g) {
  // Every new thread starts on device 0 already; set it anyway so the choice is in one place.
  if (auto dev = PrepareRankDevice(g.loaded->request.backend()); !dev.ok()) TLOG(WARN) << dev.status().message();
  const absl::Status st = engine::RunWorkerLoop(*g.loaded->model, *g.loaded->comm);
  if (st.ok()) {
    if (!g.settled.exchange(true)) {
      SetState(v1::RANK_STATE_LOADED, "the head stopped the group of generation " + std::to_string(g.generation));
      if (!options_.state_dir.empty()) (void)ClearAssignment(options_.state_dir);
      std::lock_guard<std::mutex> l(mu_);
      persisted_.Clear();
    }
  } else if (!g.settled.load()) {
    // Name the likely cause: a head whose agent no longer answers is gone, not just slow.
    auto probe = g.remote->Probe(kGenerationKey, milliseconds(500));
    const std::string cause = probe.ok() ? "lost the group" : "head lost";
    FailGroup(g, cause + " (generation " + std::to_string(g.generation) + "): " + StatusText(st));
  }
  std::lock_guard<std::mutex> l(g.stop_mu);
  g.stop = true;
  g.stop_cv.notify_all();
}

void EngineHost::FailGroup(Group& g, const std::string& reason) {
  if (g.settled.exchange(true)) return;
  TLOG(ERROR) << "rank failed: " << reason;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (group_.get() == &g) SetStateLocked(v1::RANK_STATE_FAILED, reason);
  }
  // The other ranks notice at once (closed connections) instead of at their next deadline.
  g.Abort(reason);
}

void EngineHost::HeartbeatLoop(Group& g) {
  // Its own thread, one short RPC per beat: an unreachable head must neither delay the monitor's
  // head-lost check nor keep a leave waiting.
  const std::string key = HeartbeatKey(g.generation, g.rank);
  for (uint64_t beat = 1;; ++beat) {
    (void)g.remote->SetOnce(key, std::to_string(beat), milliseconds(1000));  // the monitor reports a lost head
    std::unique_lock<std::mutex> l(g.stop_mu);
    if (g.stop_cv.wait_for(l, options_.peer_heartbeat, [&] { return g.stop; })) return;
  }
}

void EngineHost::MonitorLoop(Group& g) {
  // This thread only gathers what DecideGroupHealth (agentd/group_monitor.h) looks at and acts on
  // its verdict; the rules are all there. The head's reads are local (its own store); a worker's
  // are one RPC to the head's store per generation poll.
  GroupObservation o;
  o.generation = g.generation;
  o.head_lost_after = options_.head_lost_after;
  o.store_last_reached = Clock::now();
  auto next_poll = Clock::now() + options_.generation_poll;
  bool kv_known = g.rank == 0;
  const bool watch_peers = g.rank == 0 && g.world > 1 && options_.peer_heartbeat.count() > 0 &&
                           options_.peer_lost_after.count() > 0;
  PeerWatch peers(g.world, options_.peer_lost_after, Clock::now());
  for (;;) {
    {
      std::unique_lock<std::mutex> l(g.stop_mu);
      g.stop_cv.wait_for(l, milliseconds(100), [&] { return g.stop; });
      if (g.stop) return;
    }
    o.settled = g.settled.load();
    if (o.settled) continue;  // nothing more to report: no reads either
    o.now = Clock::now();
    o.engine_failed = g.stack && !g.stack->engine().healthy();
    o.engine_error = o.engine_failed ? g.stack->engine().fatal_error() : absl::OkStatus();
    o.lost_peer.reset();
    if (watch_peers) {
      for (int r = 1; r < g.world; ++r) peers.Observe(r, options_.local_store->TryGet(HeartbeatKey(g.generation, r)), o.now);
      o.lost_peer = peers.Lost(o.now);
    }
    o.generation_read = o.now >= next_poll;
    if (o.generation_read) {
      next_poll = o.now + options_.generation_poll;
      o.store_error = absl::OkStatus();
      o.generation_value.reset();
      if (g.rank == 0) {
        o.generation_value = options_.local_store->TryGet(kGenerationKey);
      } else {
        auto probe = g.remote->Probe(kGenerationKey, milliseconds(1000));
        o.now = Clock::now();  // the probe may have taken its whole deadline
        if (!probe.ok()) {
          o.store_error = probe.status();
        } else {
          o.store_last_reached = o.now;
          o.generation_value = *probe;
          if (!kv_known) kv_known = LearnPoolSizes(g);
        }
      }
    }
    const GroupVerdict verdict = DecideGroupHealth(o);
    if (verdict.failed) FailGroup(g, verdict.reason);
  }
}

bool EngineHost::LearnPoolSizes(Group& g) {
  const std::string prefix = engine::GenerationPrefix(g.generation);
  auto kv = g.remote->Probe(prefix + "/kv_tokens", milliseconds(1000));
  if (!kv.ok() || !kv->has_value()) return false;
  // The head sets state_slots before kv_tokens; an older head sets none (0: no slots).
  auto slots = g.remote->Probe(prefix + "/state_slots", milliseconds(1000));
  std::lock_guard<std::mutex> l(mu_);
  kv_tokens_ = std::strtoll((*kv)->c_str(), nullptr, 10);
  state_slots_ = slots.ok() && slots->has_value() ? static_cast<int32_t>(std::strtol((*slots)->c_str(), nullptr, 10)) : 0;
  ++version_;
  changed_.notify_all();
  return true;
}

}  // namespace tandem::agentd
