#include "kernels/sample.h"

#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// Rows per launch: their parameters travel by value (64 * 16 bytes, well inside the 4 KiB limit).
constexpr int kRowsPerLaunch = 64;
// The top_k set is gathered into shared memory (key and probability, 32 KiB) for the nucleus
// search when it has at most this many tokens (top_k <= kGather and few ties at K_k).
constexpr int kGather = 4 * kThreads;

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

// The smallest K in [lo, hi] with reached(K), for reached monotone in K and true at hi (never
// evaluated there). Uniform: every thread holds the same bounds, so reached may sync the block.
template <typename F>
__device__ __forceinline__ uint32_t Bisect(uint32_t lo, uint32_t hi, F reached) {
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (reached(mid)) hi = mid; else lo = mid + 1;
  }
  return hi;
}

// The key of a = (m - x) / temperature (sample.h): non-negative floats order like their bits.
__device__ __forceinline__ uint32_t Key(float a) { return a == 0.0f ? 0u : __float_as_uint(a); }

// One block per row. Passes over the row (it stays in L2): the max; with top_k, up to 32 bisection
// rounds on the key counting tokens (K_k); with top_p, the nucleus of {key <= K_k}: when that set
// has at most kGather tokens, two passes gather it into shared memory (in vocabulary order, so its
// sums are as deterministic as the row's) and the bisection on its mass reads only those; else
// one pass for its mass and up to 32 bisection rounds over the row. Then the kept mass in
// contiguous per-thread chunks, a scan across threads, and a walk of each chunk in index order.
__global__ void __launch_bounds__(kThreads) SampleKernel(int32_t* out, const float* logits, SampleBatch batch,
                                                         int64_t V) {
  GridDepLaunchDependents();
  GridDepWait();  // the logits come from the previous kernel
  __shared__ float redf[kWarps];
  __shared__ int redi[kWarps];
  __shared__ uint32_t gathered_key[kGather];
  __shared__ float gathered_e[kGather];
  const SampleParams sp = batch.p[blockIdx.x];
  const float* x = logits + static_cast<int64_t>(blockIdx.x) * V;
  const float t = sp.temperature;
  // Thread j's contiguous chunk of the row: [j * chunk, (j + 1) * chunk).
  const int64_t chunk = (V + kThreads - 1) / kThreads;
  const int64_t begin = min(V, threadIdx.x * chunk), end = min(V, begin + chunk);

  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) m = fmaxf(m, x[i]);
  m = BlockAll(m, MaxF(), redf);

  uint32_t kmax = 0xffffffffu;  // keep key <= kmax
  const bool use_k = sp.top_k > 0 && sp.top_k < V;
  if (use_k) {
    kmax = Bisect(0u, 0xffffffffu, [&](uint32_t mid) {
      int count = 0;
      for (int64_t i = threadIdx.x; i < V; i += kThreads) count += Key((m - x[i]) / t) <= mid ? 1 : 0;
      return BlockAll(count, SumI(), redi) >= sp.top_k;
    });
  }
  if (sp.top_p < 1.0f) {
    int n = kGather + 1;  // the size of {key <= kmax} when counted; more than fits otherwise
    if (use_k && sp.top_k <= kGather) {
      int mine = 0;
      for (int64_t i = begin; i < end; ++i) mine += Key((m - x[i]) / t) <= kmax ? 1 : 0;
      int pos = BlockExclusiveScan(mine, redi, &n);
      if (n <= kGather) {
        for (int64_t i = begin; i < end; ++i) {
          const float a = (m - x[i]) / t;
          const uint32_t k = Key(a);
          if (k <= kmax) {
            gathered_key[pos] = k;
            gathered_e[pos] = expf(-a);
            ++pos;
          }
        }
        __syncthreads();
      }
    }
    // The mass of {key <= k}, for k <= kmax; one fixed summation order per row, so monotone in k.
    const auto mass_upto = [&](uint32_t k) {
      float mass = 0.0f;
      if (n <= kGather) {
        for (int j = threadIdx.x; j < n; j += kThreads) {
          if (gathered_key[j] <= k) mass += gathered_e[j];
        }
      } else {
        for (int64_t i = threadIdx.x; i < V; i += kThreads) {
          const float a = (m - x[i]) / t;
          if (Key(a) <= k) mass += expf(-a);
        }
      }
      return BlockAll(mass, SumF(), redf);
    };
    // top_p of the top_k set's mass (of the whole row without top_k): at most the mass at kmax,
    // which mass_upto(kmax) sums in the same order, so kmax itself always qualifies.
    const float target = sp.top_p * mass_upto(kmax);
    kmax = Bisect(0u, kmax, [&](uint32_t mid) { return mass_upto(mid) >= target; });
  }

  // Inverse CDF over S = {key <= kmax} in index order, over the threads' chunks.
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
  float zs;
  const float offset = BlockExclusiveScan(s, redf, &zs);
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
