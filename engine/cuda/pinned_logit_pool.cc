#include "engine/cuda/pinned_logit_pool.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <new>
#include <string>

#include "common/status.h"
#include "engine/cuda/device_array.h"

namespace tandem::engine::cuda {

PinnedLogitPool::~PinnedLogitPool() {
  // Lent buffers outlive nothing: each lent one holds the pool (the vector's allocator owns a
  // shared_ptr), so by now every buffer is idle.
  for (void* p : idle_) cudaFreeHost(p);
}

int64_t PinnedLogitPool::FindIdle(size_t bytes) const {
  int64_t best = -1;
  for (size_t i = 0; i < idle_.size(); ++i) {
    const size_t cap = capacity_.at(idle_[i]);
    if (cap >= bytes && (best < 0 || cap < capacity_.at(idle_[best]))) best = static_cast<int64_t>(i);
  }
  return best;
}

absl::Status PinnedLogitPool::Reserve(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FindIdle(bytes) >= 0) return absl::OkStatus();
  // Nothing idle is big enough: replace the largest idle buffer (a batch that grew) rather than add
  // one more, so growth does not leave small buffers behind.
  if (idle_.size() >= kKeepFree) {
    auto largest = std::max_element(idle_.begin(), idle_.end(),
                                    [&](void* a, void* b) { return capacity_.at(a) < capacity_.at(b); });
    cudaFreeHost(*largest);
    capacity_.erase(*largest);
    idle_.erase(largest);
  }
  void* p = nullptr;
  const size_t size = std::max<size_t>(bytes, 1);
  RETURN_IF_ERROR(
      CudaStatus(cudaMallocHost(&p, size), "cudaMallocHost of " + std::to_string(bytes) + " bytes for logits"));
  capacity_[p] = size;
  idle_.push_back(p);
  return absl::OkStatus();
}

void* PinnedLogitPool::Take(size_t bytes) {
  for (;;) {  // another thread may take what Reserve added: look again
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (const int64_t i = FindIdle(bytes); i >= 0) {
        void* p = idle_[i];
        idle_.erase(idle_.begin() + i);
        return p;
      }
    }
    if (!Reserve(bytes).ok()) throw std::bad_alloc();
  }
}

void PinnedLogitPool::Give(void* p, size_t /*bytes*/) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() >= kKeepFree) {
    cudaFreeHost(p);
    capacity_.erase(p);
    return;
  }
  idle_.push_back(p);
}

size_t PinnedLogitPool::buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_.size();
}

}  // namespace tandem::engine::cuda
