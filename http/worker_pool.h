// The server's worker threads (internal): started on demand up to a maximum, kept for reuse.
// Stop waits a bounded time and then leaves a stuck thread behind (detached): the pool's shared
// state stays alive as long as any of its threads, so a late thread touches nothing freed.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

namespace tandem::http {

class WorkerPool {
 public:
  explicit WorkerPool(int max_threads);
  ~WorkerPool();  // Stop with no wait
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`; starts a thread when none is idle and fewer than max_threads exist. Never
  // blocks. The caller bounds the queue (the server admits at most max_in_flight requests).
  void Submit(std::function<void()> task);
  // Runs what is queued, then ends the threads; waits until `deadline` and detaches the
  // threads still running. True when every thread ended.
  bool Stop(std::chrono::steady_clock::time_point deadline);

  int threads() const;

  struct State;  // shared by the pool and its threads (worker_pool.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tandem::http
