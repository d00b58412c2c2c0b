// Quantized weights widened to the bf16 pairs the tensor-core kernels take (mma_rows.cuh), exactly:
// every e4m3 value is a bf16 value, and an e2m1 code (2 significant bits) times its e4m3 group scale
// (4) has at most 6 significant bits, inside bf16's 8, with float32's exponent range. Used by the
// FP8 dense products of decode batches (quant_fp8_batched.cu) and the quantized decode-batch
// experts (quant_moe_batched.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/mma_rows.cuh"
#include "kernels/quant_fp8.cuh"
#include "kernels/quant_nvfp4.cuh"

namespace tandem::kernels {

// The 8 e4m3 bytes of one load (byte i = element i) as the bf16 pairs (0, 1), (2, 3), (4, 5), (6, 7).
__device__ __forceinline__ uint4 Fp8EightToBf16(const uint2& raw) {
  float f[8];
  Fp8x4ToFloat(raw.x, f);
  Fp8x4ToFloat(raw.y, f + 4);
  return make_uint4(PackFloatsBf16(f[0], f[1]), PackFloatsBf16(f[2], f[3]), PackFloatsBf16(f[4], f[5]),
                    PackFloatsBf16(f[6], f[7]));
}

// A half pair (low half first) as a bf16 pair.
__device__ __forceinline__ uint32_t HalfPairToBf16(__half2 h) {
  const float2 f = __half22float2(h);
  return PackFloatsBf16(f.x, f.y);
}

// The 8 e2m1 codes of one NVFP4 word (element i in nibble i: the even column low in each byte) times
// their e4m3 group scale `scale_byte`, times 2^-14, as the bf16 pairs (0, 4), (1, 5), (2, 6), (3, 7)
// (mma_rows::SharedFloatRowsSpread pairs the tokens alike). Each code is placed in a half as
// e2m1 * 2^-14 (its 3 exponent-and-mantissa bits under the half's, so 0.5 becomes the subnormal
// 2^-15), multiplied by the scale in half precision (exact: the product's lowest bit is at least
// 2^-1 * 2^-9 * 2^-14 = 2^-24, the half's subnormal step, and its largest value 6 * 448 * 2^-14 is
// far below the half's range), then widened. The caller applies 2^14 with the row's second scale.
__device__ __forceinline__ uint4 Nvfp4EightToBf16(uint32_t w, uint32_t scale_byte) {
  const __half2 sc(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(scale_byte * 0x101u), __NV_E4M3));
  auto pair = [&](uint32_t bits) { return HalfPairToBf16(__hmul2(HalfBits2(bits), sc)); };
  uint32_t h[4];
  E2m1x8ToHalfPairsSpread(w, h);  // elements (0, 4), (1, 5), (2, 6), (3, 7) placed by byte permutes
  return make_uint4(pair(h[0]), pair(h[1]), pair(h[2]), pair(h[3]));
}

}  // namespace tandem::kernels
