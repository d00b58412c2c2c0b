// The host-and-device half of the tensor-core experts of few tokens (kernels/quant_moe_token.cuh):
// how one lane's bytes of a quantized row widen to the half pairs of its mma.sync A fragments, which
// columns each pair holds, and in which order the token's values are staged to meet them. Kept apart
// from the kernels so that a host test (tests/kernels/quant_moe_token_fragments_test.cc) can check
// this arithmetic against an emulation of the mma fragment layout without a GPU.
//
// A chunk is 4 lanes' pieces of one row (lane quarter q = lane % 4 holds piece q). Within an mma the k
// order is free as long as A and B agree, so a piece widens to half pairs in the order its format
// makes cheapest, PairCols(i) names the two columns of pair i (within the piece), and StagedCols
// gives the same columns for the staged token pairs.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace tandem::kernels::detail::few_tokens {

__host__ __device__ __forceinline__ uint32_t HalfPairBits(__half2 h) {
  uint32_t bits;
  static_assert(sizeof(h) == sizeof(bits));
  memcpy(&bits, &h, sizeof bits);
  return bits;
}

__host__ __device__ __forceinline__ __half2 BitsHalfPair(uint32_t bits) {
  __half2 h;
  memcpy(static_cast<void*>(&h), &bits, sizeof h);  // the bits as they are (__half2 has no trivial assignment)
  return h;
}

// Two e4m3 bytes (the low byte first) as a half pair: exact, one instruction on sm_89 and later
// (cuda_fp8.h's software path on the host, with the same result).
__host__ __device__ __forceinline__ uint32_t E4m3PairToHalf(uint32_t two_bytes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// Block-scaled FP8, pieces of kPieceBytes (16 or 8) e4m3 bytes: pair i is bytes 2i and 2i + 1.
template <int kPieceBytes>
struct Fp8Fragments {
  static_assert(kPieceBytes == 16 || kPieceBytes == 8);
  static constexpr int kWords = kPieceBytes / 4;
  static constexpr int kChunkCols = 4 * kPieceBytes, kPairs = kPieceBytes / 2, kChunksPerRound = 4;
  __host__ __device__ static void PairCols(int i, int& a, int& b) { a = 2 * i, b = 2 * i + 1; }
  __host__ __device__ static void WidenWords(uint32_t (&a)[kPairs], const uint32_t (&w)[kWords]) {
    for (int k = 0; k < kWords; ++k) {
      a[2 * k] = E4m3PairToHalf(w[k]);
      a[2 * k + 1] = E4m3PairToHalf(w[k] >> 16);
    }
  }
};

// NVFP4, pieces of 16 bytes = 32 codes = two 16-column groups, each with an e4m3 scale byte (gs: the
// first group's byte low). Word k holds columns 8k .. 8k + 7 (column j in nibble j); its pairs are
// columns (0, 4), (1, 5), (2, 6), (3, 7). A code c as half bits ((c & 7) << 9) | ((c & 8) << 12) is
// e2m1(c) * 2^-14 exactly; times its group scale (an e4m3 value, exact in half) in half precision,
// still exact (at most 6 significant bits, the lowest at least 2^-1 * 2^-9 * 2^-14 = 2^-24, half's
// subnormal step). The caller applies 2^14 with the row's second scale.
struct Nvfp4Fragments {
  static constexpr int kWords = 4;
  static constexpr int kChunkCols = 128, kPairs = 16, kChunksPerRound = 2;
  __host__ __device__ static void PairCols(int i, int& a, int& b) {
    a = 8 * (i / 4) + i % 4;
    b = a + 4;
  }
  __host__ __device__ static void WidenWords(uint32_t (&a)[kPairs], const uint32_t (&w)[kWords], uint32_t gs) {
    const __half2 sc = BitsHalfPair(E4m3PairToHalf(gs));
    const __half2 s0 = __low2half2(sc), s1 = __high2half2(sc);
    for (int k = 0; k < kWords; ++k) {
      const __half2 s = k < 2 ? s0 : s1;
      const uint32_t v = w[k];
      a[4 * k + 0] = HalfPairBits(__hmul2(BitsHalfPair(((v & 0x00070007u) << 9) | ((v & 0x00080008u) << 12)), s));
      a[4 * k + 1] = HalfPairBits(__hmul2(BitsHalfPair(((v & 0x00700070u) << 5) | ((v & 0x00800080u) << 8)), s));
      a[4 * k + 2] = HalfPairBits(__hmul2(BitsHalfPair(((v & 0x07000700u) << 1) | ((v & 0x08000800u) << 4)), s));
      a[4 * k + 3] = HalfPairBits(__hmul2(BitsHalfPair(((v & 0x70007000u) >> 3) | (v & 0x80008000u)), s));
    }
  }
};

// Half pairs of the token a warp stages for one round (hi, and as many lo).
template <class F>
constexpr int kRoundPairs = F::kChunksPerRound * 4 * F::kPairs;

// Where pair i of lane quarter q's piece of the round's chunk n is staged: lanes q (hi) and 4 + q (lo)
// hand it to the mma as B's columns 0 and 1.
template <class F>
__host__ __device__ __forceinline__ int StagedIndex(int n, int q, int i) {
  return (n * 4 + q) * F::kPairs + i;
}

// The columns of staged pair s (StagedIndex's inverse) of a round starting at chunk `first`.
template <class F>
__host__ __device__ __forceinline__ void StagedCols(int s, int first, int& a, int& b) {
  const int n = s / (4 * F::kPairs), q = s / F::kPairs % 4, i = s % F::kPairs;
  F::PairCols(i, a, b);
  const int base = (first + n) * F::kChunkCols + q * (F::kChunkCols / 4);
  a += base;
  b += base;
}

// The operands of mma j (j < kPairs / 2) of a chunk, on a lane whose row g piece widened to wa, row
// g + 8 piece to wb, and whose staged token pairs of the chunk are xb: A's four registers are (row g,
// k 2q..), (row g + 8, k 2q..), (row g, k 2q+8..), (row g + 8, k 2q+8..), so pairs 2j and 2j + 1 of
// each row, and B's two registers are the staged pairs 2j and 2j + 1.
template <class F>
__host__ __device__ __forceinline__ void MmaOperands(int j, const uint32_t (&wa)[F::kPairs], const uint32_t (&wb)[F::kPairs],
                                                     const uint32_t (&xb)[F::kPairs], uint32_t (&a)[4], uint32_t (&b)[2]) {
  a[0] = wa[2 * j], a[1] = wb[2 * j], a[2] = wa[2 * j + 1], a[3] = wb[2 * j + 1];
  b[0] = xb[2 * j], b[1] = xb[2 * j + 1];
}

}  // namespace tandem::kernels::detail::few_tokens
