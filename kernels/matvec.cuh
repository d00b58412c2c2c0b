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
