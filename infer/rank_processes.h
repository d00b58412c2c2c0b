// Ranks as separate processes on this machine: rank 0 (the caller) spawns ranks 1..N-1 as copies
// of its own binary with hidden flags `--rank R --world N --store DIR`, watches them while the
// group works, and reaps them at the end. A rank that dies makes the others fail at once: the
// watcher aborts rank 0's comm (whose peers then see their connections close), so nothing waits
// out a deadline, and children never outlive the launcher.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/subprocess.h"
#include "engine/comm/comm.h"

namespace tandem::infer {

// The exit code of a spawned rank that failed because the group broke (a collective failed: peer
// lost, deadline, abort), as opposed to failing by itself. The launcher blames the others first.
inline constexpr int kExitLostGroup = 4;

// True when `st` is a collective's failure (the group broke) rather than this rank's own error.
bool IsGroupFailure(const absl::Status& st);

class RankProcesses {
 public:
  // Spawns ranks 1..world-1: `exe` with `args` + the hidden flags; their stdout is discarded,
  // their stderr shared with ours (log lines carry "rank R").
  static absl::StatusOr<std::unique_ptr<RankProcesses>> Spawn(const std::string& exe,
                                                              const std::vector<std::string>& args,
                                                              int world, const std::string& store_dir);
  ~RankProcesses();  // stops the watcher; kills and reaps children still running

  // From now on a child that exits aborts `comm` with a message naming it (safe before the comm
  // exists: pass nullptr first, then the comm once created; before that, a dead child makes the
  // launcher print the reason and exit 1, since the rendezvous cannot be interrupted).
  void SetComm(engine::Comm* comm);
  // Waits until every child has exited (up to `timeout`), then kills stragglers. Error naming
  // the child that failed by itself (non-zero exit other than kExitLostGroup, a signal, or no
  // exit in time) in preference to those that only lost the group.
  absl::Status Finish(std::chrono::milliseconds timeout);

 private:
  RankProcesses() = default;
  void Watch();

  std::vector<Subprocess> children_;  // children_[i] is rank i + 1
  std::mutex mu_;
  engine::Comm* comm_ = nullptr;
  std::string failure_;
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

// The path of the running binary (/proc/self/exe).
absl::StatusOr<std::string> SelfExecutable();

}  // namespace tandem::infer
