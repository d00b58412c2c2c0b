// A Comm that times another: every collective is forwarded, and all-reduce time is accumulated
// (and optionally reported per call) so that the server can export an all-reduce histogram
// without the model knowing about metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "engine/comm/comm.h"

namespace tandem::engine {

class TimedComm final : public Comm {
 public:
  // `inner` is not owned. `on_all_reduce(seconds, bytes)` (may be empty) runs on the calling
  // thread after every all-reduce; it must be cheap.
  explicit TimedComm(Comm* inner, std::function<void(double, size_t)> on_all_reduce = {})
      : inner_(inner), on_all_reduce_(std::move(on_all_reduce)) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduceSum(float* data, size_t n) override {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status st = inner_->AllReduceSum(data, n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    all_reduce_nanos_.fetch_add(static_cast<int64_t>(s * 1e9), std::memory_order_relaxed);
    all_reduce_count_.fetch_add(1, std::memory_order_relaxed);
    if (on_all_reduce_) on_all_reduce_(s, n * sizeof(float));
    return st;
  }
  absl::Status Broadcast(void* data, size_t nbytes, int root) override {
    return inner_->Broadcast(data, nbytes, root);
  }
  absl::Status Gather(const float* send, size_t n, float* recv, int root) override {
    return inner_->Gather(send, n, recv, root);
  }
  absl::Status Barrier() override { return inner_->Barrier(); }
  void Abort(const std::string& reason) override { inner_->Abort(reason); }
  bool aborted() const override { return inner_->aborted(); }
  std::string transport() const override { return inner_->transport(); }

  double all_reduce_seconds() const { return all_reduce_nanos_.load(std::memory_order_relaxed) * 1e-9; }
  int64_t all_reduce_count() const { return all_reduce_count_.load(std::memory_order_relaxed); }

 private:
  Comm* inner_;
  std::function<void(double, size_t)> on_all_reduce_;
  std::atomic<int64_t> all_reduce_nanos_{0};
  std::atomic<int64_t> all_reduce_count_{0};
};

}  // namespace tandem::engine
