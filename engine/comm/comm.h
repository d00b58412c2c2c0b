// Tensor-parallel communication between the ranks of one group. Gloo (TCP, CPU) implements it
// now; NCCL (GPU) will implement the same interface. Every collective has a deadline: one that
// does not complete in time returns kDeadlineExceeded (and the comm is aborted), never hangs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::engine {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In-place sum over all ranks of `n` floats.
  virtual absl::Status AllReduceSum(float* data, size_t n) = 0;
  // Copies `nbytes` from `root` to every rank, in place.
  virtual absl::Status Broadcast(void* data, size_t nbytes, int root) = 0;
  // Rank r contributes `n` floats from `send`; on `root`, `recv` (world_size * n floats) receives
  // them in rank order. `recv` may be null on other ranks.
  virtual absl::Status Gather(const float* send, size_t n, float* recv, int root) = 0;
  virtual absl::Status Barrier() = 0;
  // Makes every pending and later collective fail at once (safe to call from another thread).
  virtual void Abort(const std::string& reason) = 0;
  virtual bool aborted() const = 0;
  // "gloo/tcp", "nccl/ib", "nccl/socket", "local".
  virtual std::string transport() const = 0;
};

}  // namespace tandem::engine
