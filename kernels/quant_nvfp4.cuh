// The e2m1 decoding of the NVFP4 kernels (quant_nvfp4.cu), host and device, so the tests can check
// the nibble order and the values against E2m1ToFloat (quant_weight.h) without a GPU.
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_runtime.h>
#include <cuda_fp16.h>

namespace tandem::kernels {

// __byte_perm on the device (one PRMT); on the host the same result for the selectors used here:
// result byte n is byte (s >> 4n) & 7 of the eight bytes b:a (0-3 from a, 4-7 from b).
__host__ __device__ __forceinline__ uint32_t BytePerm(uint32_t a, uint32_t b, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(a, b, s);
#else
  const uint64_t v = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * n)) & 7))) & 0xffu) << (8 * n);
  return r;
#endif
}

// Two halves given by their bits (element 0 in the low 16) as floats.
__host__ __device__ __forceinline__ float2 HalfBitsToFloat2(uint32_t bits) {
  __half2 h;
  static_assert(sizeof(h) == sizeof(bits));
  memcpy(static_cast<void*>(&h), &bits, sizeof h);  // the bits as they are (one register on the device)
  return __half22float2(h);
}

// The 8 e2m1 codes of an NVFP4 word (column i in nibble i, the even column low in each byte) as
// e2m1 * 2^-14, exactly. There is no e2m1 convert instruction on sm_90, nor on sm_121 outside
// arch-specific (sm_121a) builds. A code c as half-precision bits ((c & 7) << 9) | ((c & 8) << 12)
// is e2m1(c) * 2^-14: the 3 magnitude bits land on the two low exponent bits and the top mantissa
// bit, and the subnormal code (0.5) becomes a half subnormal of the same scale. Those bits all lie
// in the half's high byte, ((c & 7) << 1) | ((c & 8) << 4), over a zero low byte, so that byte is
// made for the four even columns of the word at once and for the four odd ones (masks and shifts
// that keep each code inside its byte), and four byte permutes set the bytes over zero bytes as
// four half2: about 11 integer instructions for 8 codes where a mask-and-shift per half2 took 16.
__host__ __device__ __forceinline__ void E2m1x8ToFloat(uint32_t w, float f[8]) {
  const uint32_t even = ((w << 1) & 0x0e0e0e0eu) | ((w << 4) & 0x80808080u);  // byte k: column 2k's high byte
  const uint32_t odd = ((w >> 3) & 0x0e0e0e0eu) | (w & 0x80808080u);          // byte k: column 2k + 1's
  // Selector nibble n picks result byte n: 0-3 a byte of the first word, 4 a byte of the zero word.
  const float2 a = HalfBitsToFloat2(BytePerm(even, 0u, 0x1404u));  // columns 0, 2
  const float2 b = HalfBitsToFloat2(BytePerm(even, 0u, 0x3424u));  // 4, 6
  const float2 c = HalfBitsToFloat2(BytePerm(odd, 0u, 0x1404u));   // 1, 3
  const float2 d = HalfBitsToFloat2(BytePerm(odd, 0u, 0x3424u));   // 5, 7
  f[0] = a.x, f[2] = a.y, f[4] = b.x, f[6] = b.y, f[1] = c.x, f[3] = c.y, f[5] = d.x, f[7] = d.y;
}

}  // namespace tandem::kernels
