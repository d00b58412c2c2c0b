// Memory the cuda model owns: device arrays and pinned host buffers that grow on demand, with CUDA
// errors returned as absl::Status (out of memory is RESOURCE_EXHAUSTED, so the process hosting
// the engine reports it instead of aborting).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace tandem::engine::cuda {

// OK, or the error naming `what`: RESOURCE_EXHAUSTED for an allocation that did not fit, INTERNAL
// otherwise.
inline absl::Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg = what + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the next call does not report it again
    return absl::ResourceExhaustedError(msg);
  }
  return absl::InternalError(msg);
}

// A device allocation of n T's.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { Free(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    Free();
    p_ = o.p_, n_ = o.n_;
    o.p_ = nullptr, o.n_ = 0;
    return *this;
  }
  absl::Status Allocate(int64_t n) {
    Free();
    const absl::Status st = CudaStatus(cudaMalloc(&p_, std::max<int64_t>(n, 1) * sizeof(T)),
                                       "cudaMalloc of " + std::to_string(n * sizeof(T)) + " bytes");
    if (!st.ok()) {
      p_ = nullptr;
      return st;
    }
    n_ = n;
    return absl::OkStatus();
  }
  // Grows (contents lost) when smaller than n; *grew |= whether it reallocated. On an error the
  // array is empty (a later Reserve tries again).
  absl::Status Reserve(int64_t n, bool* grew) {
    if (n <= n_) return absl::OkStatus();
    *grew = true;
    return Allocate(n);
  }
  void Free() {
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr, n_ = 0;
  }
  T* get() const { return p_; }
  int64_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
};

// Page-locked host memory of at least n T's (asynchronous copies to and from the device need it).
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { Free(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // At least n (contents lost when it grows).
  absl::Status Reserve(int64_t n) {
    if (n <= cap_) return absl::OkStatus();
    Free();
    if (cudaError_t err = cudaMallocHost(&p_, n * sizeof(T)); err != cudaSuccess) {
      p_ = nullptr;
      return CudaStatus(err, "cudaMallocHost of " + std::to_string(n * sizeof(T)) + " bytes");
    }
    cap_ = n;
    return absl::OkStatus();
  }
  void Free() {
    if (p_ != nullptr) cudaFreeHost(p_);
    p_ = nullptr, cap_ = 0;
  }
  T* get() const { return p_; }

  int64_t capacity() const { return cap_; }

 private:
  T* p_ = nullptr;
  int64_t cap_ = 0;
};

}  // namespace tandem::engine::cuda
