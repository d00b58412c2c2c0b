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

// Two halves given by their bits (element 0 in the low 16) as a half2: the bits as they are (one
// register on the device).
__host__ __device__ __forceinline__ __half2 HalfBits2(uint32_t bits) {
  __half2 h;
  static_assert(sizeof(h) == sizeof(bits));
  memcpy(static_cast<void*>(&h), &bits, sizeof h);
  return h;
}

// Two halves given by their bits as floats.
__host__ __device__ __forceinline__ float2 HalfBitsToFloat2(uint32_t bits) { return __half22float2(HalfBits2(bits)); }

// The e2m1 codes of an NVFP4 word (column i in nibble i, the even column low in each byte) as the
// high bytes of their halves e2m1 * 2^-14. There is no e2m1 convert instruction on sm_90, nor on
// sm_121 outside arch-specific (sm_121a) builds. A code c as half-precision bits
// ((c & 7) << 9) | ((c & 8) << 12) is e2m1(c) * 2^-14 exactly: the 3 magnitude bits land on the two
// low exponent bits and the top mantissa bit, and the subnormal code (0.5) becomes a half subnormal
// of the same scale. Those bits all lie in the half's high byte, ((c & 7) << 1) | ((c & 8) << 4),
// over a zero low byte, so that byte is made for the four even columns of the word at once (`even`,
// byte k: column 2k) and for the four odd ones (`odd`, byte k: column 2k + 1) by masks and shifts
// that keep each code inside its byte; byte permutes then set any two of them over zero bytes as a
// half2: about 11 integer instructions for 8 codes where a mask and shift per half2 took 16.
struct E2m1HalfBytes {
  uint32_t even, odd;
};
__host__ __device__ __forceinline__ E2m1HalfBytes E2m1x8HalfBytes(uint32_t w) {
  return {((w << 1) & 0x0e0e0e0eu) | ((w << 4) & 0x80808080u), ((w >> 3) & 0x0e0e0e0eu) | (w & 0x80808080u)};
}

// Selector nibble n picks result byte n: 0-3 a byte of the first word, 4 a byte of the zero word.
// kPairLo01 sets bytes 0 and 1 of a half-byte word as the high bytes of a half2 (low half first),
// kPairHi23 bytes 2 and 3, kPairSpread02 bytes 0 and 2, kPairSpread13 bytes 1 and 3.
constexpr uint32_t kPairLo01 = 0x1404u, kPairHi23 = 0x3424u, kPairSpread02 = 0x2404u, kPairSpread13 = 0x3414u;

// The 8 codes as the half2 bits (e2m1 * 2^-14, low half first) of the column pairs (0, 2), (4, 6),
// (1, 3), (5, 7): the pairing of the float32 and half2 products of quant_nvfp4.cu.
__host__ __device__ __forceinline__ void E2m1x8ToHalfPairs(uint32_t w, uint32_t h[4]) {
  const E2m1HalfBytes hb = E2m1x8HalfBytes(w);
  h[0] = BytePerm(hb.even, 0u, kPairLo01);  // columns 0, 2
  h[1] = BytePerm(hb.even, 0u, kPairHi23);  // 4, 6
  h[2] = BytePerm(hb.odd, 0u, kPairLo01);   // 1, 3
  h[3] = BytePerm(hb.odd, 0u, kPairHi23);   // 5, 7
}

// The 8 codes as e2m1 * 2^-14 in float32, exactly.
__host__ __device__ __forceinline__ void E2m1x8ToFloat(uint32_t w, float f[8]) {
  uint32_t h[4];
  E2m1x8ToHalfPairs(w, h);
  const float2 a = HalfBitsToFloat2(h[0]), b = HalfBitsToFloat2(h[1]), c = HalfBitsToFloat2(h[2]),
               d = HalfBitsToFloat2(h[3]);
  f[0] = a.x, f[2] = a.y, f[4] = b.x, f[6] = b.y, f[1] = c.x, f[3] = c.y, f[5] = d.x, f[7] = d.y;
}

// The 8 codes as the half2 bits (e2m1 * 2^-14, low half first) of the column pairs (0, 4), (1, 5),
// (2, 6), (3, 7): the pairing of the tensor-core kernels' widened weights (quant_widen.cuh).
__host__ __device__ __forceinline__ void E2m1x8ToHalfPairsSpread(uint32_t w, uint32_t h[4]) {
  const E2m1HalfBytes hb = E2m1x8HalfBytes(w);
  h[0] = BytePerm(hb.even, 0u, kPairSpread02);  // columns 0 (even byte 0), 4 (even byte 2)
  h[1] = BytePerm(hb.odd, 0u, kPairSpread02);   // 1, 5
  h[2] = BytePerm(hb.even, 0u, kPairSpread13);  // 2, 6
  h[3] = BytePerm(hb.odd, 0u, kPairSpread13);   // 3, 7
}

// The two e4m3 group scales of a 16-byte NVFP4 load (scale byte 0 in bits 0-7, byte 1 in bits 8-15;
// higher bits are not read) as the half2 bits of e4m3 * 2^-8 (scale 0 low): each byte b as half bits
// ((b & 0x7f) << 7) | ((b & 0x80) << 8), exact (the NaN code 0x7f is not special-cased), placed by
// one byte permute over zero bytes and one mask: 3 instructions for both where the per-byte form
// took about 7 each.
__host__ __device__ __forceinline__ uint32_t E4m3x2HalfBits(uint32_t sc) {
  const uint32_t t = BytePerm(sc, 0u, kPairLo01);  // byte 0 -> bits 8-15, byte 1 -> bits 24-31
  return ((t >> 1) & 0x3f803f80u) | (t & 0x80008000u);
}

}  // namespace tandem::kernels
