// Small device helpers shared by the kernels: warp reductions and 16-byte bf16 loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

namespace tandem::kernels {

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Exclusive scan of v across the block in thread order (warp scan, then the warp totals in order);
// *total = the sum over every thread. A fixed order, so float sums round the same way every time.
// `red` holds blockDim.x / 32 values (blockDim.x a multiple of 32); consecutive calls may share it.
template <typename T>
__device__ __forceinline__ T BlockExclusiveScan(T v, T* red, T* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  T incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  T excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = T(0);
  __syncthreads();  // red's last readers are done
  if (lane == 31) red[warp] = incl;
  __syncthreads();
  T offset = T(0), sum = T(0);
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
    if (w == warp) offset = sum;
    sum += red[w];
  }
  *total = sum;
  return offset + excl;
}

__device__ __forceinline__ float Bf16At(const uint16_t* p, int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}

// Eight bf16 weights as float from a raw 16-byte load.
__device__ __forceinline__ void Widen8(const uint4& raw, float out[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Eight bf16 (one 16-byte load) widened to float. `p` must be 16-byte aligned.
__device__ __forceinline__ void Load8Bf16(const uint16_t* p, float out[8]) {
  Widen8(__ldg(reinterpret_cast<const uint4*>(p)), out);
}

// KV cache elements: bf16 (half the bytes), float32 (exact) or fp8 e4m3 (a quarter; the caller
// applies the layer's scale), one kernel template for all. e4m3 rounds to nearest even and
// saturates to +-448 (kernels/fp8.h's host encoder gives the same bits).
__device__ __forceinline__ float KvLoad(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float KvLoad(const float* p) { return *p; }
__device__ __forceinline__ float KvLoad(const __nv_fp8_e4m3* p) { return static_cast<float>(*p); }
__device__ __forceinline__ void KvStore(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void KvStore(float* p, float v) { *p = v; }
__device__ __forceinline__ void KvStore(__nv_fp8_e4m3* p, float v) {
  p->__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ float SiluF(float x) { return x / (1.0f + __expf(-x)); }

// The end of a dense product's warp (bf16, FP8 and NVFP4 alike): lane 0 stores its R rows' sums
// for the tile's nt tokens, y[(t0 + t) * out + o0 + r]; rows past `out` are dropped.
template <int R, int TT>
__device__ __forceinline__ void StoreRowsTile(float* y, const float (&acc)[R][TT], int64_t out, int64_t o0, int64_t t0,
                                              int nt, int lane) {
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      if (t < nt && o0 + r < out) y[(t0 + t) * out + o0 + r] = acc[r][t];
    }
  }
}

// The end of a moe_down block (bf16, FP8 and NVFP4 alike): each warp's weighted sums of rows
// h0 .. h0 + kRows (on its lane 0) go through shared memory and are added in warp order, so the
// sum over a token's expert slots is deterministic; rows past H are dropped. Synchronises the block.
template <int kWarps, int kRows>
__device__ __forceinline__ void StoreSlotSums(float* out_row, float (&partial)[kWarps][kRows], const float (&sum)[kRows],
                                              int64_t h0, int64_t H, int warp, int lane) {
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) partial[warp][r] = sum[r];
  }
  __syncthreads();
  if (threadIdx.x < kRows && h0 + threadIdx.x < H) {
    float s = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += partial[w][threadIdx.x];
    out_row[h0 + threadIdx.x] = s;
  }
}

}  // namespace tandem::kernels
