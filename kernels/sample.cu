#include "kernels/sample.h"

#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// Rows per launch: their parameters travel by value (64 * 16 bytes, well inside the 4 KiB limit).
constexpr int kRowsPerLaunch = 64;

struct SampleBatch {
  SampleParams p[kRowsPerLaunch];
};

struct SumF {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SumI {
  __device__ int operator()(int a, int b) const { return a + b; }
};
struct MaxF {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MaxI {
  __device__ int operator()(int a, int b) const { return max(a, b); }
};
struct MinI {
  __device__ int operator()(int a, int b) const { return min(a, b); }
};

// The reduction of v over the block, returned to every thread. Fixed order (xor butterfly, then the
// warps in order), so every pass over the same data rounds the same way. `red` holds kWarps values.
template <typename T, typename Op>
__device__ __forceinline__ T BlockAll(T v, Op op, T* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // every thread has read the previous use of `red`
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  T r = red[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = op(r, red[w]);
  return r;
}

// The key of a = (m - x) / temperature (sample.h): non-negative floats order like their bits.
__device__ __forceinline__ uint32_t Key(float a) { return a == 0.0f ? 0u : __float_as_uint(a); }

// One block per row. Passes over the row (it stays in L2): the max, the total mass, up to 32
// bisection rounds on the key for top_k (counts) and top_p (masses) together, then the kept mass in
// contiguous per-thread chunks, a scan across threads, and a walk of each chunk in index order.
__global__ void __launch_bounds__(kThreads) SampleKernel(int32_t* out, const float* logits, SampleBatch batch,
                                                         int64_t V) {
  GridDepLaunchDependents();
  GridDepWait();  // the logits come from the previous kernel
  __shared__ float redf[kWarps];
  __shared__ int redi[kWarps];
  const SampleParams sp = batch.p[blockIdx.x];
  const float* x = logits + static_cast<int64_t>(blockIdx.x) * V;
  const float t = sp.temperature;

  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) m = fmaxf(m, x[i]);
  m = BlockAll(m, MaxF(), redf);

  // Bisection: the smallest K with f(K) true, f monotone, f(0xffffffff) true (never evaluated).
  // An unused search starts finished at 0xffffffff (keeps everything).
  const bool use_k = sp.top_k > 0 && sp.top_k < V;
  const bool use_p = sp.top_p < 1.0f;
  uint32_t lo_k = 0xffffffffu, hi_k = 0xffffffffu, lo_p = 0xffffffffu, hi_p = 0xffffffffu;
  float target_p = 0.0f;
  if (use_k) lo_k = 0;
  if (use_p) {
    float z = 0.0f;
    for (int64_t i = threadIdx.x; i < V; i += kThreads) z += expf(-((m - x[i]) / t));
    z = BlockAll(z, SumF(), redf);
    target_p = sp.top_p * z;
    lo_p = 0;
  }
  while (lo_k < hi_k || lo_p < hi_p) {  // uniform: every thread holds the same bounds
    const uint32_t mid_k = lo_k + (hi_k - lo_k) / 2;
    const uint32_t mid_p = lo_p + (hi_p - lo_p) / 2;
    int count = 0;
    float mass = 0.0f;
    for (int64_t i = threadIdx.x; i < V; i += kThreads) {
      const float a = (m - x[i]) / t;
      const uint32_t k = Key(a);
      count += k <= mid_k ? 1 : 0;
      if (k <= mid_p) mass += expf(-a);
    }
    if (lo_k < hi_k) {
      count = BlockAll(count, SumI(), redi);
      if (count >= sp.top_k) hi_k = mid_k; else lo_k = mid_k + 1;
    }
    if (lo_p < hi_p) {
      mass = BlockAll(mass, SumF(), redf);
      if (mass >= target_p) hi_p = mid_p; else lo_p = mid_p + 1;
    }
  }
  const uint32_t kmax = min(hi_k, hi_p);

  // Inverse CDF over S = {key <= kmax} in index order: thread j owns [j * chunk, (j + 1) * chunk).
  const int64_t chunk = (V + kThreads - 1) / kThreads;
  const int64_t begin = min(V, threadIdx.x * chunk), end = min(V, begin + chunk);
  float s = 0.0f;
  int last = -1;
  for (int64_t i = begin; i < end; ++i) {
    const float a = (m - x[i]) / t;
    if (Key(a) <= kmax) {
      const float e = expf(-a);
      s += e;
      if (e > 0.0f) last = static_cast<int>(i);
    }
  }
  // Exclusive scan of s across the threads (warp scan, then the warp totals in order).
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float incl = s;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  float excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = 0.0f;
  __syncthreads();  // redf's last readers are done
  if (lane == 31) redf[warp] = incl;
  __syncthreads();
  float offset = 0.0f, zs = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    if (w == warp) offset = zs;
    zs += redf[w];
  }
  offset += excl;
  const float target = sp.u * zs;
  // The first index whose running mass passes the target; the lowest over the threads (their
  // offsets and own sums round apart, so more than one, or none, may claim it).
  int cand = 0x7fffffff;
  float cum = offset;
  for (int64_t i = begin; i < end; ++i) {
    const float a = (m - x[i]) / t;
    if (Key(a) <= kmax) {
      const float e = expf(-a);
      cum += e;
      // e > 0: a thread whose offset already passes the target (rounding) must not claim a
      // token of probability 0 (a -inf logit); the reference never would.
      if (e > 0.0f && cum > target) {
        cand = static_cast<int>(i);
        break;
      }
    }
  }
  cand = BlockAll(cand, MinI(), redi);
  last = BlockAll(last, MaxI(), redi);
  if (threadIdx.x == 0) out[blockIdx.x] = cand != 0x7fffffff ? cand : (last >= 0 ? last : 0);
}

}  // namespace

void sample(int32_t* out, const float* logits, const SampleParams* params, int64_t R, int64_t V,
            cudaStream_t stream) {
  KERNEL_REQUIRE(V > 0 && V <= 0x7fffffff);
  for (int64_t r0 = 0; r0 < R; r0 += kRowsPerLaunch) {
    const int64_t n = R - r0 < kRowsPerLaunch ? R - r0 : kRowsPerLaunch;
    SampleBatch batch = {};
    for (int64_t r = 0; r < n; ++r) {
      KERNEL_REQUIRE(SampleParamsValid(params[r0 + r]));  // temperature 0: call argmax instead
      batch.p[r] = params[r0 + r];
    }
    Launch(SampleKernel, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, stream, out + r0, logits + r0 * V,
           batch, V);
    KERNEL_CHECK();
  }
}

}  // namespace tandem::kernels
