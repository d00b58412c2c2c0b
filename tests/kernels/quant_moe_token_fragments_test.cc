// The fragment arithmetic of the tensor-core experts of few tokens (kernels/quant_moe_token.cuh),
// checked on the host, no GPU needed: each format's pieces widened to half pairs
// (kernels/quant_moe_token_fragments.cuh), the token staged in StagedCols order as half hi and lo,
// and mma.sync m16n8k16 emulated from the fragment layout the PTX ISA gives for
// .row.col.f32.f16.f16.f32 must give each of a warp's 16 rows its dot product with the token, the
// weights dequantized by the references' own decoders (kernels/quant_weight.h). A wrong pair order, a
// staged column off by one or a fragment register swapped gives another sum.
//
// The layout emulated (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), lane l
// with group g = l / 4 and quarter q = l % 4:
//   A (16 x 16, row-major): register 0 = A[g][2q .. 2q+1], 1 = A[g+8][2q ..], 2 = A[g][2q+8 ..],
//                           3 = A[g+8][2q+8 ..] (the lower element in the low half);
//   B (16 x 8, column-major): register 0 = B[2q .. 2q+1][g], 1 = B[2q+8 .. 2q+9][g];
//   C (16 x 8 float): c0, c1 = C[g][2q], C[g][2q+1]; c2, c3 = C[g+8][2q], C[g+8][2q+1].
// The kernel takes mma j's registers from MmaOperands (the lane's staged pairs at StagedIndex: hi on
// lanes 0-3, lo on lanes 4-7, zero elsewhere), and reads row g's product as c0 + c1 on lane 4g, row
// g+8's as c2 + c3.
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/quant_moe_token_fragments.cuh"
#include "kernels/quant_weight.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels::detail::few_tokens {
namespace {

double HalfValue(uint32_t bits) { return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu))); }

// The two halves of a pair register.
std::array<double, 2> Pair(uint32_t bits) { return {HalfValue(bits), HalfValue(bits >> 16)}; }

// One warp's round over `nchunks` chunks (first = 0) of a 16-row tile: widen(m, c, q, a) fills the
// half pairs of row m's piece q of chunk c; x the token. Returns each row's sum as the kernel forms it.
template <class F>
std::array<double, 16> EmulateRound(const std::function<void(int, int, int, uint32_t (&)[F::kPairs])>& widen,
                                    const std::vector<float>& x, int nchunks) {
  // The staged token, hi and lo, for every pair the round needs.
  const int pairs = nchunks * 4 * F::kPairs;
  std::vector<uint32_t> hi(pairs), lo(pairs);
  for (int s = 0; s < pairs; ++s) {
    int a, b;
    StagedCols<F>(s, 0, a, b);
    const __half2 h = __floats2half2_rn(x[a], x[b]);
    const float2 hf = __half22float2(h);
    hi[s] = HalfPairBits(h);
    lo[s] = HalfPairBits(__floats2half2_rn(x[a] - hf.x, x[b] - hf.y));
  }
  std::array<double, 16> out{};
  for (int c = 0; c < nchunks; ++c) {
    // Every lane's A pairs for this chunk: a[lane][0] row g, a[lane][1] row g + 8.
    uint32_t a[32][2][F::kPairs];
    for (int l = 0; l < 32; ++l) {
      widen(l / 4, c, l % 4, a[l][0]);
      widen(l / 4 + 8, c, l % 4, a[l][1]);
    }
    for (int j = 0; j < F::kPairs / 2; ++j) {
      double A[16][16] = {}, B[16][8] = {};
      for (int l = 0; l < 32; ++l) {
        const int g = l / 4, q = l % 4;
        uint32_t xb[F::kPairs] = {};
        const uint32_t* xs = l < 4 ? hi.data() : l < 8 ? lo.data() : nullptr;
        for (int i = 0; xs != nullptr && i < F::kPairs; ++i) xb[i] = xs[StagedIndex<F>(c, q, i)];
        uint32_t reg[4], breg[2];
        MmaOperands<F>(j, a[l][0], a[l][1], xb, reg, breg);
        for (int e = 0; e < 2; ++e) {
          A[g][2 * q + e] = Pair(reg[0])[e];
          A[g + 8][2 * q + e] = Pair(reg[1])[e];
          A[g][2 * q + 8 + e] = Pair(reg[2])[e];
          A[g + 8][2 * q + 8 + e] = Pair(reg[3])[e];
          B[2 * q + e][g] = Pair(breg[0])[e];
          B[2 * q + 8 + e][g] = Pair(breg[1])[e];
        }
      }
      for (int m = 0; m < 16; ++m) {
        double c0 = 0, c1 = 0;
        for (int k = 0; k < 16; ++k) c0 += A[m][k] * B[k][0], c1 += A[m][k] * B[k][1];
        out[m] += c0 + c1;  // lane 4g: c0 + c1 (row g) and c2 + c3 (row g + 8)
      }
    }
  }
  return out;
}

std::vector<float> Token(int cols) {
  std::vector<float> x = testing::RandomFloats(cols);
  for (float& v : x) v *= 40.0f;  // inside half's range, where the kernel's power of two puts it
  return x;
}

template <int kPieceBytes>
void CheckFp8() {
  using F = Fp8Fragments<kPieceBytes>;
  const int nchunks = F::kChunksPerRound, cols = nchunks * F::kChunkCols;
  std::vector<uint8_t> w(16 * cols);
  for (auto& b : w) {
    do {
      b = static_cast<uint8_t>(testing::Rng()() & 0xff);
    } while ((b & 0x7f) == 0x7f);  // not the NaN codes
  }
  const std::vector<float> x = Token(cols);
  const auto widen = [&](int m, int c, int q, uint32_t (&a)[F::kPairs]) {
    uint32_t words[F::kWords];
    std::memcpy(words, &w[m * cols + c * F::kChunkCols + q * kPieceBytes], kPieceBytes);
    F::WidenWords(a, words);
  };
  const std::array<double, 16> got = EmulateRound<F>(widen, x, nchunks);
  for (int m = 0; m < 16; ++m) {
    double want = 0, scale = 0;
    for (int k = 0; k < cols; ++k) {
      want += static_cast<double>(E4m3ToFloat(w[m * cols + k])) * x[k];
      scale += std::fabs(static_cast<double>(E4m3ToFloat(w[m * cols + k])) * x[k]);
    }
    EXPECT_NEAR(got[m], want, 1e-6 * scale) << "fp8 piece " << kPieceBytes << " row " << m;
  }
}

TEST(quant_moe_token_fragments, Fp8SixteenBytePieces) { CheckFp8<16>(); }
TEST(quant_moe_token_fragments, Fp8EightBytePieces) { CheckFp8<8>(); }

TEST(quant_moe_token_fragments, Nvfp4) {
  using F = Nvfp4Fragments;
  const int nchunks = F::kChunksPerRound, cols = nchunks * F::kChunkCols;
  std::vector<uint8_t> codes(16 * cols / 2), gs(16 * cols / 16);
  for (auto& b : codes) b = static_cast<uint8_t>(testing::Rng()() & 0xff);  // every code in both nibbles
  for (auto& b : gs) b = static_cast<uint8_t>(testing::Rng()() % 0x7f);    // positive, not NaN
  const std::vector<float> x = Token(cols);
  const auto widen = [&](int m, int c, int q, uint32_t (&a)[F::kPairs]) {
    const int byte = m * cols / 2 + c * F::kChunkCols / 2 + q * 16;
    uint32_t words[F::kWords];
    std::memcpy(words, &codes[byte], 16);
    const int group = (c * F::kChunkCols + q * 32) / 16;
    F::WidenWords(a, words, gs[m * cols / 16 + group] | (gs[m * cols / 16 + group + 1] << 8));
  };
  const std::array<double, 16> got = EmulateRound<F>(widen, x, nchunks);
  for (int m = 0; m < 16; ++m) {
    double want = 0, scale = 0;
    for (int k = 0; k < cols; ++k) {
      const uint8_t byte = codes[(m * cols + k) / 2];
      const uint8_t code = k % 2 == 0 ? byte & 0xf : byte >> 4;  // the even column low
      const double v = E2m1ToFloat(code) * E4m3ToFloat(gs[m * cols / 16 + k / 16]) * std::ldexp(1.0, -14) * x[k];
      want += v;
      scale += std::fabs(v);
    }
    EXPECT_NEAR(got[m], want, 1e-6 * scale) << "nvfp4 row " << m;
  }
}

// Each pair's columns, over a round, are every column of its chunks once.
TEST(quant_moe_token_fragments, StagedColumnsCoverEachColumnOnce) {
  const auto check = [](auto tag, int first) {
    using F = decltype(tag);
    std::vector<int> seen(F::kChunksPerRound * F::kChunkCols, 0);
    for (int s = 0; s < kRoundPairs<F>; ++s) {
      int a, b;
      StagedCols<F>(s, first, a, b);
      a -= first * F::kChunkCols, b -= first * F::kChunkCols;
      ASSERT_TRUE(a >= 0 && a < static_cast<int>(seen.size()) && b >= 0 && b < static_cast<int>(seen.size()));
      ++seen[a], ++seen[b];
    }
    for (int c : seen) EXPECT_EQ(c, 1);
  };
  check(Fp8Fragments<16>{}, 0);
  check(Fp8Fragments<16>{}, 5);
  check(Fp8Fragments<8>{}, 3);
  check(Nvfp4Fragments{}, 2);
}

}  // namespace
}  // namespace tandem::kernels::detail::few_tokens
