#include "kernels/norm_matmul.h"

#include "kernels/cp_async.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/matvec.cuh"
#include "kernels/split_order.h"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

// srow[i] = (w_offset + norm_w) * (srow[i] * scale) for the float4s i = first, first + step, ...
// below nv; the writer block also stores the row before (x_out) and after (xn_out, when not null).
__device__ __forceinline__ void NormaliseRow(float4* srow, float* x_out, float* xn_out, const uint16_t* norm_w,
                                             int64_t nv, float scale, float w_offset, bool writer, int first,
                                             int step) {
  for (int64_t i = first; i < nv; i += step) {
    float4 v = srow[i];
    if (writer) reinterpret_cast<float4*>(x_out)[i] = v;
    v.x = (w_offset + Bf16At(norm_w, 4 * i)) * (v.x * scale);
    v.y = (w_offset + Bf16At(norm_w, 4 * i + 1)) * (v.y * scale);
    v.z = (w_offset + Bf16At(norm_w, 4 * i + 2)) * (v.z * scale);
    v.w = (w_offset + Bf16At(norm_w, 4 * i + 3)) * (v.w * scale);
    srow[i] = v;
    if (writer && xn_out != nullptr) reinterpret_cast<float4*>(xn_out)[i] = v;
  }
}

// Grid (ceil(out / (kWarps * R)), ceil(T / TT)), dynamic shared memory TT * in floats and the
// norm's in bf16 weights. Every block: loads its rows' first weight chunks and copies the norm's
// weights into shared memory (both before waiting for the previous kernel: weights never change
// during a step), then normalises its TT token rows into shared memory (r = x_in + delta; one
// token: the block reduces its sum of squares; a tile: a warp per token), then runs the matvec of
// MatmulKernel over them. Block x == 0 of each token tile also stores r and xn.
// Blocks an SM must hold at once. The one-row batch-1 shape with up to 4 loads in flight is the
// q/k/v product of the 2K-hidden models (5120 rows = 640 blocks): at its natural 58 registers an SM
// held 4 of them, 528 on 132 SMs, and the other 112 ran as a second wave that repeated the norm and
// the load rounds after the first wave ended (per-block globaltimer stamps: the launch's last block
// ended 17 us after the previous kernel against 9 us for the median first-wave block). At 48
// registers (5 a SM, no spills on sm_90 or sm_121) the whole product is one wave: a bf16 batch-1
// step 0.9% faster at 1k and 1.1% at 4k on the H200 (docs/bench/decode-h200.md, session 43).
template <int R, int NL, int TT>
constexpr int NormMatmulMinBlocks() {
  return R == 1 && TT == 1 && NL <= 4 ? 5 : 1;
}

// kSplit (one token): block 0 also stores xn in split order to xn_split (kernels/split_order.h), after
// the barrier below, each thread writing whole float4s of the output in turn (coalesced) from the
// normalised row in shared memory.
template <int R, int NL, int TT, bool kSplit = false>
__global__ void __launch_bounds__(kThreads, NormMatmulMinBlocks<R, NL, TT>())
    NormMatmulKernel(float* __restrict__ y, float* __restrict__ x_out, float* __restrict__ xn_out,
                     float* __restrict__ xn_split, const float* __restrict__ x_in, const float* __restrict__ delta,
                     const uint16_t* __restrict__ norm_w, const uint16_t* __restrict__ w, int64_t T, int64_t in,
                     int64_t out, float eps, float w_offset) {
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
  uint16_t* snw = reinterpret_cast<uint16_t*>(sx + TT * in);
  for (int i = threadIdx.x; i < static_cast<int>(in / 8); i += kThreads) {
    CpAsync16(SmemAddr(snw + 8 * i), norm_w + 8 * i, true);
  }
  CpAsyncCommit();
  GridDepWait();

  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * TT;
  const int nt = T - t0 < TT ? static_cast<int>(T - t0) : TT;
  const bool writer = blockIdx.x == 0;
  const int64_t nv = in / 4;
  if constexpr (TT == 1) {
    // One token: the whole block normalises it (block-reduced sum of squares).
    const float4* xr = reinterpret_cast<const float4*>(x_in + t0 * in);
    const float4* dr = delta != nullptr ? reinterpret_cast<const float4*>(delta + t0 * in) : nullptr;
    float ss = 0;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < nv; i += kThreads) {
      float4 v = xr[i];
      if (dr != nullptr) {
        const float4 d = dr[i];
        v.x += d.x, v.y += d.y, v.z += d.z, v.w += d.w;
      }
      smem4[i] = v;
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = WarpSum(ss);
    if (lane == 0) red[warp] = ss;
    CpAsyncWait<0>();  // the norm's weights (this thread's copies; the barrier: everyone's)
    __syncthreads();
    float total = 0;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) total += red[i];
    NormaliseRow(smem4, x_out + t0 * in, xn_out != nullptr ? xn_out + t0 * in : nullptr, snw, nv,
                 rsqrtf(total / static_cast<float>(in) + eps), w_offset, writer, threadIdx.x, kThreads);
  } else {
    // A token tile: warp t normalises token t on its own (warp-reduced sum of squares), all at once.
    // With one block barrier per token instead, the router's product at a decode batch of 8 (16
    // blocks of 8 rows, each normalising all 8 tokens in turn) took 16.4 us a layer on the H200
    // against 4.5 at batch 1 (Nsight Compute, session 19).
    static_assert(TT <= kWarps, "one warp per token of the tile");
    CpAsyncWait<0>();  // the norm's weights (this thread's copies; the barrier: everyone's)
    __syncthreads();
    if (warp < nt) {
      const float4* xr = reinterpret_cast<const float4*>(x_in + (t0 + warp) * in);
      const float4* dr = delta != nullptr ? reinterpret_cast<const float4*>(delta + (t0 + warp) * in) : nullptr;
      float4* srow = smem4 + warp * nv;
      float ss = 0;
#pragma unroll 4
      for (int64_t i = lane; i < nv; i += 32) {
        float4 v = xr[i];
        if (dr != nullptr) {
          const float4 d = dr[i];
          v.x += d.x, v.y += d.y, v.z += d.z, v.w += d.w;
        }
        srow[i] = v;
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
      ss = WarpSum(ss);
      // Each lane rewrites the elements it stored above: no barrier between the passes.
      NormaliseRow(srow, x_out + (t0 + warp) * in, xn_out != nullptr ? xn_out + (t0 + warp) * in : nullptr, snw,
                   nv, rsqrtf(ss / static_cast<float>(in) + eps), w_offset, writer, lane, 32);
    }
  }
  __syncthreads();  // every row of the tile normalised before the products
  if constexpr (kSplit) {
    static_assert(TT == 1, "the split order is stored for one token");
    if (blockIdx.x == 0) {
      float4* dst = reinterpret_cast<float4*>(xn_split);
      for (int64_t o = threadIdx.x; o < nv; o += kThreads) dst[o] = smem4[SplitOrderSource(o, in)];
    }
  }
  if (!active) return;
  RowsProduct<R, NL, TT, false>(y, sx, buf, rows, in, out, o0, t0, nt, lane);
}

template <int R, int NL, int TT, bool kSplit>
void LaunchShape(float* y, float* x_out, float* xn_out, float* xn_split, const float* x_in, const float* delta,
                 const uint16_t* norm_w, const uint16_t* w, int64_t T, int64_t in, int64_t out, float eps,
                 float w_offset, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(TT) * in * sizeof(float) + in * sizeof(uint16_t);
  static size_t opted_in = 48 * 1024;  // per instantiation: raise the dynamic shared memory cap once
  if (smem > opted_in) {
    CUDA_CHECK(cudaFuncSetAttribute(NormMatmulKernel<R, NL, TT, kSplit>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    opted_in = smem;
  }
  const int64_t rows_per_block = kWarps * R;
  const dim3 grid(static_cast<unsigned>((out + rows_per_block - 1) / rows_per_block),
                  static_cast<unsigned>((T + TT - 1) / TT));
  Launch(NormMatmulKernel<R, NL, TT, kSplit>, grid, dim3(kThreads), smem, s, y, x_out, xn_out, xn_split, x_in, delta, norm_w,
         w, T, in, out, eps, w_offset);
}

template <int TT, bool kSplit = false>
void LaunchTile(float* y, float* x_out, float* xn_out, float* xn_split, const float* x_in, const float* delta,
                const uint16_t* norm_w, const uint16_t* w, int64_t T, int64_t in, int64_t out, float eps,
                float w_offset, cudaStream_t s) {
  DispatchMatvecShape<TT>(MatvecShape(in, TT, out), [&]<int R, int NL>() {
    LaunchShape<R, NL, TT, kSplit>(y, x_out, xn_out, xn_split, x_in, delta, norm_w, w, T, in, out, eps, w_offset, s);
  });
}

}  // namespace

void add_rmsnorm_matmul(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                        const bf16_bits* norm_w, const bf16_bits* w, int64_t T, int64_t in, int64_t out, float eps,
                        cudaStream_t stream, float w_offset, float* xn_split) {
  KERNEL_REQUIRE(in % 8 == 0);
  KERNEL_REQUIRE(x_out != x_in && x_out != delta);
  KERNEL_REQUIRE(xn_split == nullptr || (T == 1 && in % 32 == 0));
  for (const void* p : {static_cast<const void*>(y), static_cast<const void*>(x_out), static_cast<const void*>(xn_out),
                        static_cast<const void*>(xn_split), static_cast<const void*>(x_in),
                        static_cast<const void*>(delta), static_cast<const void*>(w)}) {
    KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(p) % 16 == 0);
  }
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(norm_w) % 16 == 0);
  KERNEL_REQUIRE((8 * 4 + 2) * in <= 200 * 1024);  // the largest token tile and the norm weights fit
  if (T == 0) return;
  if (T == 1 && xn_split != nullptr) {
    LaunchTile<1, true>(y, x_out, xn_out, xn_split, x_in, delta, norm_w, w, T, in, out, eps, w_offset, stream);
  } else if (T == 1) {
    LaunchTile<1>(y, x_out, xn_out, nullptr, x_in, delta, norm_w, w, T, in, out, eps, w_offset, stream);
  } else if (T <= 4) {
    LaunchTile<4>(y, x_out, xn_out, nullptr, x_in, delta, norm_w, w, T, in, out, eps, w_offset, stream);
  } else {
    LaunchTile<8>(y, x_out, xn_out, nullptr, x_in, delta, norm_w, w, T, in, out, eps, w_offset, stream);
  }
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
