// Runs the ranks of a group as threads of this process (tests, tandem-infer --tp N without
// separate processes). Each thread creates its rank's comm (LocalComm for a group of one, Gloo
// over loopback otherwise) and runs `body` with it.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "engine/comm/comm.h"
#include "engine/comm/store.h"

namespace tandem::engine {

struct RankThreadsOptions {
  std::string hostname_or_iface = "127.0.0.1";
  std::chrono::milliseconds timeout{30000};          // each collective
  std::chrono::milliseconds connect_timeout{30000};  // the rendezvous
  // The whole run; 0 = no limit. When it passes, every comm is aborted (so bodies blocked in a
  // collective return at once) and the result is DeadlineExceeded. A body busy computing is
  // still joined: threads cannot be killed.
  std::chrono::milliseconds deadline{0};
  size_t direct_allreduce_max_bytes = 256 << 10;  // see GlooCommOptions
};

// `body(comm)` runs once per rank, concurrently. Returns OK when every rank returned OK, else the
// first error (prefixed with "rank r: "). When one rank fails, the others' comms are aborted so
// that they stop waiting for it. Keys go under a fresh prefix of `store` per call.
absl::Status RunRanksAsThreads(int world_size, Store& store,
                               const std::function<absl::Status(Comm&)>& body,
                               const RankThreadsOptions& options = {});
// The same with a private in-memory store.
absl::Status RunRanksAsThreads(int world_size, const std::function<absl::Status(Comm&)>& body,
                               const RankThreadsOptions& options = {});

}  // namespace tandem::engine
