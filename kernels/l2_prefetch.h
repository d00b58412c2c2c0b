// Weights of a later kernel that a one-token decode kernel asks the L2 for while it waits on its
// predecessor. The experts' gate/up kernel can load nothing of its own before that wait (its
// experts come from the router's top-k), so DRAM idles for the wait; asking the L2 then for the
// start of the next layer's first weights (its q/k/v product) moves those bytes into the idle time,
// and that product later reads them from the L2 (docs/bench/decode-h200.md, session 43).
#pragma once

#include <cstdint>

namespace tandem::kernels {

struct L2Prefetch {
  const void* data = nullptr;  // weights: never written during a step
  int64_t bytes = 0;           // 0: nothing to prefetch
};

#ifdef __CUDACC__
// Every thread of the grid (x and y; one-dimensional blocks) asks the L2 for its share of the
// range's 128-byte lines: no registers held after it, nothing waits for them, and a line already in
// the L2 costs nothing more. 32-bit line indices, as the callers are register-bound kernels: a range
// past 2^31 lines is cut there, and a grid of 2^31 threads or more asks for nothing.
__device__ __forceinline__ void PrefetchL2(const L2Prefetch& r) {
  const int64_t threads = static_cast<int64_t>(gridDim.x) * gridDim.y * blockDim.x;
  if (r.bytes <= 0 || threads >= (int64_t{1} << 31)) return;
  const char* p = static_cast<const char*>(r.data);
  const unsigned lines = static_cast<unsigned>(r.bytes / 128 < (int64_t{1} << 31) ? r.bytes / 128 : int64_t{1} << 31);
  const unsigned n = static_cast<unsigned>(threads);
  for (unsigned k = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x; k < lines; k += n) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + static_cast<size_t>(k) * 128));
  }
}
#endif

}  // namespace tandem::kernels
