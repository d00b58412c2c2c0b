#include "kernels/norm_matmul.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/matvec.cuh"
#include "kernels/router_topk.cuh"
#include "kernels/router_topk.h"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

// Grid (ceil(out / (kWarps * R)), ceil(T / TT)), dynamic shared memory TT * in floats. Every block:
// loads its rows' first weight chunks (before waiting for the previous kernel), then normalises its
// TT token rows into shared memory (r = x_in + delta, block-reduced sum of squares), then runs the
// matvec of MatmulKernel over them. Block x == 0 of each token tile also stores r and xn.
// With kTopk (the router) the last block to finish runs the top-k of every token over y
// (TopkEpilogue; the "last block" pattern of kernels/attention.cu's fused merge).
template <int R, int NL, int TT, bool kTopk = false>
__global__ void __launch_bounds__(kThreads) NormMatmulKernel(float* __restrict__ y, float* __restrict__ x_out,
                                                             float* __restrict__ xn_out, const float* __restrict__ x_in,
                                                             const float* __restrict__ delta,
                                                             const uint16_t* __restrict__ norm_w,
                                                             const uint16_t* __restrict__ w, int64_t T, int64_t in,
                                                             int64_t out, float eps, float w_offset,
                                                             TopkEpilogue topk) {
  extern __shared__ float4 smem4[];
  float* sx = reinterpret_cast<float*>(smem4);
  __shared__ float red[kWarps];
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * R;
  const bool active = o0 < out;  // no early return: the block synchronises below
  const uint16_t* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + (o0 + r < out ? o0 + r : 0) * in;
  uint4 buf[R][NL];
  if (active) {
#pragma unroll
    for (int r = 0; r < R; ++r) LoadChunk<NL>(buf[r], rows[r], 0, in, lane);
  }
  GridDepWait();

  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * TT;
  const int nt = T - t0 < TT ? static_cast<int>(T - t0) : TT;
  const bool writer = blockIdx.x == 0;
  const int64_t nv = in / 4;
  for (int t = 0; t < nt; ++t) {
    const float4* xr = reinterpret_cast<const float4*>(x_in + (t0 + t) * in);
    const float4* dr = delta != nullptr ? reinterpret_cast<const float4*>(delta + (t0 + t) * in) : nullptr;
    float4* srow = smem4 + t * nv;
    float ss = 0;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < nv; i += kThreads) {
      float4 v = xr[i];
      if (dr != nullptr) {
        const float4 d = dr[i];
        v.x += d.x, v.y += d.y, v.z += d.z, v.w += d.w;
      }
      srow[i] = v;
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = WarpSum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    float total = 0;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) total += red[i];
    const float scale = rsqrtf(total / static_cast<float>(in) + eps);
    for (int64_t i = threadIdx.x; i < nv; i += kThreads) {
      float4 v = srow[i];
      if (writer) reinterpret_cast<float4*>(x_out + (t0 + t) * in)[i] = v;
      v.x = (w_offset + Bf16At(norm_w, 4 * i)) * (v.x * scale);
      v.y = (w_offset + Bf16At(norm_w, 4 * i + 1)) * (v.y * scale);
      v.z = (w_offset + Bf16At(norm_w, 4 * i + 2)) * (v.z * scale);
      v.w = (w_offset + Bf16At(norm_w, 4 * i + 3)) * (v.w * scale);
      srow[i] = v;
      if (writer && xn_out != nullptr) reinterpret_cast<float4*>(xn_out + (t0 + t) * in)[i] = v;
    }
    __syncthreads();  // red[] is reused by the next token; srow complete before the products
  }
  if constexpr (!kTopk) {
    if (!active) return;
    RowsProduct<R, NL, TT, false>(y, sx, buf, rows, in, out, o0, t0, nt, lane);
  } else {
    if (active) RowsProduct<R, NL, TT, false>(y, sx, buf, rows, in, out, o0, t0, nt, lane);
    // Each block counts itself once its logits are visible device-wide; the last one (all of y is
    // written) routes every token, a warp per token, and puts the counter back to 0 for the next
    // launch (and graph replay).
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      const uint32_t blocks = gridDim.x * gridDim.y;
      last = atomicAdd(topk.counter, 1u) == blocks - 1;
      if (last) *topk.counter = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const int E = static_cast<int>(topk.E), K = static_cast<int>(topk.K);
    const int64_t KS = K + (topk.shared ? 1 : 0);
    for (int64_t t = warp; t < T; t += kWarps) {
      if (E <= 256) {
        TopkWarp<8>(topk.ids + t * KS, topk.weights + t * KS, y + t * out, E, K, topk.renormalize, topk.shared, lane);
      } else {
        TopkWarp<16>(topk.ids + t * KS, topk.weights + t * KS, y + t * out, E, K, topk.renormalize, topk.shared, lane);
      }
    }
  }
}

template <int R, int NL, int TT, bool kTopk>
void LaunchShape(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta, const uint16_t* norm_w,
                 const uint16_t* w, int64_t T, int64_t in, int64_t out, float eps, float w_offset,
                 const TopkEpilogue& topk, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(TT) * in * sizeof(float);
  static size_t opted_in = 48 * 1024;  // per instantiation: raise the dynamic shared memory cap once
  if (smem > opted_in) {
    CUDA_CHECK(cudaFuncSetAttribute(NormMatmulKernel<R, NL, TT, kTopk>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    opted_in = smem;
  }
  const int64_t rows_per_block = kWarps * R;
  const dim3 grid(static_cast<unsigned>((out + rows_per_block - 1) / rows_per_block),
                  static_cast<unsigned>((T + TT - 1) / TT));
  Launch(NormMatmulKernel<R, NL, TT, kTopk>, grid, dim3(kThreads), smem, s, y, x_out, xn_out, x_in, delta, norm_w, w,
         T, in, out, eps, w_offset, topk);
}

// The router (kTopk) takes only one-row shapes (its E + 1 rows are short): half the instantiations.
template <int TT, bool kTopk = false>
void LaunchTile(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta, const uint16_t* norm_w,
                const uint16_t* w, int64_t T, int64_t in, int64_t out, float eps, float w_offset,
                const TopkEpilogue& topk, cudaStream_t s) {
  DispatchMatvecShape<TT, kTopk>(MatvecShape(in, TT, out), [&]<int R, int NL>() {
    LaunchShape<R, NL, TT, kTopk>(y, x_out, xn_out, x_in, delta, norm_w, w, T, in, out, eps, w_offset, topk, s);
  });
}

void CheckArgs(const float* y, const float* x_out, const float* xn_out, const float* x_in, const float* delta,
               const bf16_bits* w, int64_t in) {
  KERNEL_REQUIRE(in % 8 == 0);
  KERNEL_REQUIRE(x_out != x_in && x_out != delta);
  for (const void* p : {static_cast<const void*>(y), static_cast<const void*>(x_out), static_cast<const void*>(xn_out),
                        static_cast<const void*>(x_in), static_cast<const void*>(delta), static_cast<const void*>(w)}) {
    KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(p) % 16 == 0);
  }
  KERNEL_REQUIRE(8 * in * static_cast<int64_t>(sizeof(float)) <= 200 * 1024);  // the largest token tile fits
}

}  // namespace

void add_rmsnorm_matmul(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                        const bf16_bits* norm_w, const bf16_bits* w, int64_t T, int64_t in, int64_t out, float eps,
                        cudaStream_t stream, float w_offset) {
  CheckArgs(y, x_out, xn_out, x_in, delta, w, in);
  if (T == 0) return;
  const TopkEpilogue none;
  if (T == 1) {
    LaunchTile<1>(y, x_out, xn_out, x_in, delta, norm_w, w, T, in, out, eps, w_offset, none, stream);
  } else if (T <= 4) {
    LaunchTile<4>(y, x_out, xn_out, x_in, delta, norm_w, w, T, in, out, eps, w_offset, none, stream);
  } else {
    LaunchTile<8>(y, x_out, xn_out, x_in, delta, norm_w, w, T, in, out, eps, w_offset, none, stream);
  }
  KERNEL_CHECK();
}

void add_rmsnorm_matmul_topk(float* logits, float* x_out, float* xn_out, const float* x_in, const float* delta,
                             const bf16_bits* norm_w, const bf16_bits* w, int64_t T, int64_t in, float eps,
                             const TopkEpilogue& topk, cudaStream_t stream, float w_offset) {
  CheckArgs(logits, x_out, xn_out, x_in, delta, w, in);
  KERNEL_REQUIRE(topk.counter != nullptr && topk.E <= kRouterMaxExperts && topk.K >= 1 && topk.K <= topk.E);
  KERNEL_REQUIRE(T <= kTopkEpilogueMaxTokens);
  if (T == 0) return;
  const int64_t out = topk.E + (topk.shared ? 1 : 0);
  if (T == 1) {
    LaunchTile<1, true>(logits, x_out, xn_out, x_in, delta, norm_w, w, T, in, out, eps, w_offset, topk, stream);
  } else if (T <= 4) {
    LaunchTile<4, true>(logits, x_out, xn_out, x_in, delta, norm_w, w, T, in, out, eps, w_offset, topk, stream);
  } else {
    LaunchTile<8, true>(logits, x_out, xn_out, x_in, delta, norm_w, w, T, in, out, eps, w_offset, topk, stream);
  }
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
