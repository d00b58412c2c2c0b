// The inner loop every bf16 product shares (dense matmul, MoE experts): one warp, one weight row,
// up to TT token vectors. Each lane takes 8 consecutive weights per 16-byte load, with several
// loads in flight (unrolled), and accumulates in float32; the result is warp-reduced.
#pragma once

#include <cstdint>

#include "kernels/device_utils.cuh"

namespace tandem::kernels {

// acc[t] (on every lane) = dot(w_row (in), x + t*in) for t < nt; acc[t >= nt] = 0.
template <int TT>
__device__ __forceinline__ void RowDot(float acc[TT], const uint16_t* w_row, const float* x, int64_t in,
                                       int nt, int lane) {
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;
#pragma unroll 4
  for (int64_t i = lane * 8; i < in; i += 32 * 8) {
    float wv[8];
    Load8Bf16Stream(w_row + i, wv);
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      if (t < nt) {
        const float4* xp = reinterpret_cast<const float4*>(x + t * in + i);
        const float4 a = xp[0], b = xp[1];
        acc[t] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y +
                  wv[6] * b.z + wv[7] * b.w;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = WarpSum(acc[t]);
}

}  // namespace tandem::kernels

namespace tandem::kernels {

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

// acc[r] (every lane) = dot(rows[r] (in), xs[r] (in)) for NR rows at once: decode at batch 1 is
// bound by how many bytes are in flight, so every weight load of an iteration (NR rows x 2 steps of
// 16 bytes per lane) is issued before the first is used.
template <int NR>
__device__ __forceinline__ void RowsDot(float acc[NR], const uint16_t* const rows[NR], const float* const xs[NR],
                                        int64_t in, int lane) {
#pragma unroll
  for (int r = 0; r < NR; ++r) acc[r] = 0.0f;
  for (int64_t i = lane * 8; i < in; i += 2 * 32 * 8) {
    const bool second = i + 32 * 8 < in;
    uint4 w0[NR], w1[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) w0[r] = __ldcs(reinterpret_cast<const uint4*>(rows[r] + i));
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      if (second) w1[r] = __ldcs(reinterpret_cast<const uint4*>(rows[r] + i + 32 * 8));
    }
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      float w[8];
      Widen8(w0[r], w);
      const float4* xp = reinterpret_cast<const float4*>(xs[r] + i);
      const float4 a = xp[0], b = xp[1];
      acc[r] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
      if (second) {
        Widen8(w1[r], w);
        const float4* xq = reinterpret_cast<const float4*>(xs[r] + i + 32 * 8);
        const float4 c = xq[0], d = xq[1];
        acc[r] += w[0] * c.x + w[1] * c.y + w[2] * c.z + w[3] * c.w + w[4] * d.x + w[5] * d.y + w[6] * d.z + w[7] * d.w;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < NR; ++r) acc[r] = WarpSum(acc[r]);
}

}  // namespace tandem::kernels
