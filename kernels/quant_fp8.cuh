// The e4m3fn decoding of the block-scaled FP8 kernels (quant_fp8.cu), host and device, so the
// tests can check the byte order and the values of the exact conversion against E4m3ToFloat
// (quant_weight.h) without a GPU.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace tandem::kernels {

// Four e4m3fn bytes of a little-endian word (byte j = element j) as float. On sm_89 and later
// (H200 sm_90, GB10 sm_121) two bytes become two halves in one instruction; every e4m3 value is a
// half and every half a float, so the result is exact. The host (and older devices) take
// cuda_fp8.h's software path with the same result.
__host__ __device__ __forceinline__ void Fp8x4ToFloat(uint32_t word, float w[4]) {
  for (int h = 0; h < 2; ++h) {
    const __half2_raw pair = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> (16 * h)), __NV_E4M3);
    const float2 f = __half22float2(__half2(pair));
    w[2 * h] = f.x;
    w[2 * h + 1] = f.y;
  }
}

// The sixteen weights of one 16-byte load.
__host__ __device__ __forceinline__ void Fp8x16ToFloat(const uint4& raw, float w[16]) {
  Fp8x4ToFloat(raw.x, w);
  Fp8x4ToFloat(raw.y, w + 4);
  Fp8x4ToFloat(raw.z, w + 8);
  Fp8x4ToFloat(raw.w, w + 12);
}

}  // namespace tandem::kernels
