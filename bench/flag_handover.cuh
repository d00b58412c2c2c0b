// A kernel handing its completion to the next one through a counter in memory instead of the grid's
// completion (griddepcontrol.wait): the hand-over rows of chain_bench.cu and wait_latency_bench.cu.
// Each block of the earlier kernel counts itself done once its work is stored; the later kernel's
// blocks spin until the count holds the earlier grid.
#pragma once

namespace tandem::bench {

// One thread of the block, after a block barrier that follows the block's stores: a release (the
// fence, then the add) of the block's work.
__device__ __forceinline__ void CountBlockDone(unsigned* done) {
  __threadfence();
  atomicAdd(done, 1u);
}

// Every thread of the block: thread 0 spins (ld.acquire.gpu) until *count reaches `expect` (a null
// count: nothing to wait for), then a block barrier lets the others on.
__device__ __forceinline__ void WaitForCount(const unsigned* count, unsigned expect) {
  if (threadIdx.x == 0 && count != nullptr) {
    unsigned v;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
    } while (v < expect);
  }
  __syncthreads();
}

}  // namespace tandem::bench
