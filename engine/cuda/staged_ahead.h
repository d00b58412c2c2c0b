// ModelLoadOptions::cuda_staged_matvec = "ahead": each layer's norm + q/k/v product (the staged
// kernel, kernels/staged_norm_matmul.h) launched on a second stream before the previous layer's ffn,
// so that it copies its weights into shared memory while the router, top-k and experts run, and
// waits on a counter that kernels::signal_done raises after that ffn. What the model needs for it:
// the second stream, the fork and join events, and one counter a layer (zeroed at each step's start,
// inside the captured graph too).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cuda/device_array.h"
#include "kernels/staged_norm_matmul.h"

namespace tandem::engine::cuda {

class StagedAhead {
 public:
  // For a model of `layers` layers on the current device.
  static absl::StatusOr<std::unique_ptr<StagedAhead>> Create(int64_t layers);
  ~StagedAhead();
  StagedAhead(const StagedAhead&) = delete;
  StagedAhead& operator=(const StagedAhead&) = delete;

  // Enqueues the counters' reset on `stream` (before any launch of the step that waits on them).
  absl::Status Reset(cudaStream_t stream);
  // What the layer after `layer` waits for: its counter raised once.
  kernels::StagedReady Ready(int64_t layer) const { return {counters_.get() + layer, 1}; }
  uint32_t* counter(int64_t layer) { return counters_.get() + layer; }
  cudaStream_t side() const { return side_; }
  cudaEvent_t fork() const { return fork_; }
  cudaEvent_t join() const { return join_; }

 private:
  StagedAhead() = default;
  DeviceArray<uint32_t> counters_;
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

}  // namespace tandem::engine::cuda
