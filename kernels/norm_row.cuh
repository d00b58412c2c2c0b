// The residual add and RMSNorm of one token row in shared memory, as the fused norm + product
// kernels compute it before their products (norm_matmul.cu for bf16 weights, staged_matvec.cuh for
// every format): each block recomputes the norm of its rows (a few KB from L2) instead of waiting
// for a separate norm kernel. (norm_matmul.cu keeps its own copies of the add loop: written through
// AddRowToShared its kernels compiled to other register counts, 39 -> 48 at a 4-token tile on
// sm_90, a change no A/B has measured; and it reads through the read-only path, which is safe
// only after a launch boundary.)
#pragma once

#include <cstdint>

#include "kernels/device_utils.cuh"

namespace tandem::kernels {

// srow[i] = xr[i] + dr[i] (dr may be null) for the float4s i = first, first + kStep, ... below nv;
// returns this thread's sum of their squares. The inputs are read from L2 (ld.global.cg), never
// through the non-coherent read-only path: the staged kernel may read them while the kernel that
// wrote them is still resident (a flag, not a launch boundary, orders the two).
template <int kStep, typename First>
__device__ __forceinline__ float AddRowToShared(float4* __restrict__ srow, const float4* xr, const float4* dr,
                                                int64_t nv, First first) {
  float ss = 0;
#pragma unroll 4
  for (int64_t i = first; i < nv; i += kStep) {
    float4 v = __ldcg(xr + i);
    if (dr != nullptr) {
      const float4 d = __ldcg(dr + i);
      v.x += d.x, v.y += d.y, v.z += d.z, v.w += d.w;
    }
    srow[i] = v;
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  return ss;
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

}  // namespace tandem::kernels
