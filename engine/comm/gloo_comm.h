// Comm over Gloo's TCP transport (CPU ranks, any network; loopback for tests).
//
// Deadlines: every collective carries `timeout`. One that does not complete in time returns
// DeadlineExceeded ("all-reduce of 4096 floats did not complete within 30 s (rank 1 of 2); peer
// lost?"); a peer whose connection drops (process killed, host gone) gives Unavailable as soon as
// the socket reports it. Either way the comm is then aborted: its connections are closed (so
// the peers fail fast too, instead of waiting out their own deadline) and every later call
// returns FailedPrecondition "comm aborted: <reason>". A group is never repaired; the owner
// builds a new one with a new generation.
//
// Abort(reason) from any thread fails the pending collective within milliseconds (it returns
// Aborted): it wakes the direct all-reduce's own receive and send (Gloo's abortWaitRecv /
// abortWaitSend, whatever state the pairs are in), then signals Gloo's transport context, the same
// path Gloo takes on its own timeouts, which fails every pending send/recv and closes every pair.
// (With signalling alone, a head's all-reduce once waited out its 10 s deadline after its only
// peer was killed mid-stream, although the comm was aborted at 3 s. The likely cause, not
// reproduced on demand: that peer's pair was already closed, and the signal needs an open one.)
//
// Process-wide side effect: the first CreateGlooComm ignores SIGPIPE when it is at its default,
// because Gloo writes to sockets with writev(), and a peer that died would otherwise kill us.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/comm/comm.h"
#include "engine/comm/store.h"

namespace tandem::engine {

struct GlooCommOptions {
  // Rendezvous. Tag it with the group generation (PrefixStore(store, GenerationPrefix(g))):
  // the keys are "0", "1", ... and "rank_0", ..., so a group must not reuse another's keys.
  Store* store = nullptr;
  int rank = 0;
  int world_size = 1;
  // The local address to listen on and publish: an interface name ("eth0", "lo") or a hostname
  // / IP address. The environment variable GLOO_SOCKET_IFNAME, when set, takes precedence (the
  // controller derives it from preflight facts).
  std::string hostname_or_iface = "127.0.0.1";
  // Deadline of each collective.
  std::chrono::milliseconds timeout{30000};
  // Deadline of the rendezvous: every peer's address in the store, every connection made.
  std::chrono::milliseconds connect_timeout{60000};
  // All-reduces that send at most this many bytes per rank ((world_size - 1) x the vector) use a
  // direct exchange (one step, results bitwise equal on all ranks) instead of Gloo's ring.
  // 0 = always the ring. Must be equal on all ranks.
  size_t direct_allreduce_max_bytes = 256 << 10;
};

// Creates the comm of `options.rank`; blocks until all `world_size` ranks have connected or
// `connect_timeout` passed. Errors: InvalidArgument (options), Unavailable (cannot open the
// device / address), DeadlineExceeded (a peer did not show up; names the missing key).
// A world of one gets a LocalComm (no store, no sockets), so TP=1 callers need no special case.
absl::StatusOr<std::unique_ptr<Comm>> CreateGlooComm(const GlooCommOptions& options);

}  // namespace tandem::engine
