// Asynchronous global -> shared copies (cp.async, sm_80 on: the H200 and the DGX Spark's GB10
// alike), shared by the kernels that stage tiles through shared memory (attention_tile.cuh's K/V
// stager, moe_batched.cu's weight stages).
#pragma once

#include <cstdint>

namespace tandem::kernels {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without passing through registers; valid == false writes zeros (and
// reads nothing from src, which must still be a valid address).
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

// 4 bytes (src 4-byte aligned) through L1, as CpAsync16 (the small per-row arrays beside a tile:
// NVFP4's group scales in quant_moe_batched.cu).
__device__ __forceinline__ void CpAsync4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}

// Closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The same for a count known only at run time: until at most n (0 <= n <= N) groups are in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWaitAtMost(int n) {
  if constexpr (N == 0) {
    CpAsyncWait<0>();
  } else {
    if (n >= N) {
      CpAsyncWait<N>();
    } else {
      CpAsyncWaitAtMost<N - 1>(n);
    }
  }
}

}  // namespace tandem::kernels
