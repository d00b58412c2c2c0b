// The residual add + RMSNorm of one token's row, done by a whole block into shared memory: the
// prologue of the products that fuse the norm before them (kernels/norm_matmul.h: the bf16 product
// and the quantized one-token products). Every block of such a product normalises the row itself
// (a few KB from L2) instead of waiting for a separate one-block norm kernel: one launch and one
// memory round trip less a norm.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cp_async.cuh"
#include "kernels/device_utils.cuh"
#include "kernels/norm_matmul.h"

namespace tandem::kernels::detail {

// A one-token product's fused norm in dynamic shared memory: the normed row (cols floats), then
// the norm's weights (cols bf16). Those products take it where cols % 8 == 0 and it takes at most
// 24 KB (hidden sizes up to 4096): a block gets 48 KB without opting in, static shared memory
// included, and the tensor-core products hold up to 8.7 KB of their own.
constexpr size_t FusedNormSmemBytes(int64_t cols) { return static_cast<size_t>(cols) * (sizeof(float) + 2); }
constexpr bool FusedNormFits(int64_t cols) { return cols > 0 && cols % 8 == 0 && FusedNormSmemBytes(cols) <= 24 * 1024; }
__device__ __forceinline__ uint16_t* NormWeightsAfter(float4* row, int64_t cols) {
  return reinterpret_cast<uint16_t*>(row + cols / 4);
}

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

// srow[i] = x_in[i] + delta[i] (delta may be null) for the float4s i = first, first + step, ...
// below nv; returns this thread's sum of their squares.
__device__ __forceinline__ float AddRowSquares(float4* srow, const float* x_in, const float* delta, int64_t nv,
                                               int first, int step) {
  const float4* xr = reinterpret_cast<const float4*>(x_in);
  const float4* dr = reinterpret_cast<const float4*>(delta);
  float ss = 0;
#pragma unroll 4
  for (int64_t i = first; i < nv; i += step) {
    float4 v = xr[i];
    if (dr != nullptr) {
      const float4 d = dr[i];
      v.x += d.x, v.y += d.y, v.z += d.z, v.w += d.w;
    }
    srow[i] = v;
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  return ss;
}

// Copies the norm's weights (cols bf16, cols % 8 == 0, 16-byte aligned) into shared memory with
// cp.async, every thread of the block a share. Call it before GridDepWait: a norm's weights never
// change during a step. BlockNormRow (or the caller's CpAsyncWait and barrier) waits for them.
__device__ __forceinline__ void StageNormWeights(uint16_t* snw, const uint16_t* norm_w, int64_t cols) {
  for (int64_t i = threadIdx.x; i < cols / 8; i += blockDim.x) CpAsync16(SmemAddr(snw + 8 * i), norm_w + 8 * i, true);
  CpAsyncCommit();
}

// The block (kThreads threads) normalises n's row into srow (cols / 4 float4s of shared memory;
// cols % 4 == 0), the norm's weights already staged by StageNormWeights into snw: each thread adds
// its float4s of x_in + delta, the block reduces the sum of squares (warps, then the warps' sums in
// order: the same rounding every time), then each thread scales the values it stored. Returns after
// a block barrier, the whole row ready for every thread. Call after GridDepWait.
template <int kThreads>
__device__ __forceinline__ void BlockNormRow(float4* srow, const uint16_t* snw, const RowNorm& n, int64_t cols,
                                             bool writer) {
  constexpr int kWarps = kThreads / 32;
  __shared__ float red[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t nv = cols / 4;
  const float ss = WarpSum(AddRowSquares(srow, n.x_in, n.delta, nv, threadIdx.x, kThreads));
  if (lane == 0) red[warp] = ss;
  CpAsyncWait<0>();  // the norm's weights (this thread's copies; the barrier: everyone's)
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) total += red[i];
  NormaliseRow(srow, n.x_out, n.xn_out, snw, nv, rsqrtf(total / static_cast<float>(cols) + n.eps), n.w_offset, writer,
               threadIdx.x, kThreads);
  __syncthreads();
}

}  // namespace tandem::kernels::detail
