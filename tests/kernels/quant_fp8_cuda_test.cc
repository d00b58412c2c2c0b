// The block-scaled FP8 kernels (kernels/quant_fp8.cu, behind quant_matmul.h / quant_moe.h) against
// their CPU references (kernels/quant_matmul_ref.cc) on fresh random e4m3 bytes (never the NaN codes
// 0x7f / 0xff) and random positive scales, one per block so a wrong scale index shows: token counts
// 1, 3, 8, 13 (one tile, a partial tile, several tiles; from 8 tokens the tensor-core kernel where
// the layout allows it) and 32 / 40 (one and two of its 32-token blocks), rows that end inside a scale block, one
// scale row per block (row_block = block_out) and per row (row_block = 1, a shard cutting a block),
// col_phase 0 / 16 / 64, blocks of 32 and 128 (the shared-scale path), and layouts whose 16-weight
// loads straddle scale blocks (col_phase 8, block_in 48 or 8: the per-element path).
// The detail:: launchers are called directly so this test needs no other format's kernels.
//
// Bound: ||out - ref|| / ||ref|| < 1e-5. The reference dequantizes exactly (float32 products of an
// e4m3 value and its scale, which the kernels form the same way) and accumulates in double; the
// kernels accumulate in float32, each lane over cols/32 terms and then a 5-level shuffle tree: the
// expected relative error is ~eps * sqrt(cols / 32) (~1e-6 for 8192 columns, eps = 6e-8; a CPU
// emulation of these kernels measured 0.6-2e-7 on such shapes), so 1e-5 has margin and still fails
// on any wrong weight, scale or row. The tensor-core kernel multiplies the exact weights (every
// e4m3 value is a bf16 value) by x as bf16 hi + lo (x to ~2^-16) with float32 accumulation: a few
// 1e-6 on these shapes, under the same bound.
// Dequantization to bf16 must equal the reference bit for bit (same float32 product, same
// round-to-nearest-even).
// The e4m3 decoding helper (kernels/quant_fp8.cuh) is checked on the host too, without a GPU.
#include <algorithm>

#include "kernels/quant_detail.h"
#include "kernels/quant_fp8.cuh"
#include "kernels/quant_matmul.h"
#include "kernels/quant_moe.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/quant_stacks.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomFloats;
using testing::Shape;
using testing::Fp8Case;
using testing::RandomExpertIds;
using testing::RandomFp8;
using testing::Describe;

constexpr double kBound = 1e-5;

TEST(quant_fp8_cuda, Fp8x16ToFloatMatchesE4m3ToFloat) {  // host only: byte order and values
  for (int first = 0; first < 256; first += 16) {
    uint8_t bytes[16];
    for (int j = 0; j < 16; ++j) bytes[j] = static_cast<uint8_t>(first + j);
    uint4 raw;
    std::memcpy(&raw, bytes, 16);
    float got[16];
    Fp8x16ToFloat(raw, got);
    for (int j = 0; j < 16; ++j) {
      const float want = E4m3ToFloat(bytes[j]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[j])) << "code " << int{bytes[j]};
      } else {
        EXPECT_EQ(got[j], want) << "code " << int{bytes[j]};
        EXPECT_EQ(std::signbit(got[j]), std::signbit(want)) << "code " << int{bytes[j]};
      }
    }
  }
}

TEST(quant_fp8_cuda, Matmul) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Fp8Case w;
    std::vector<int64_t> tokens;
  };
  const std::vector<Case> cases = {
      // Qwen3-30B-A3B's FP8 products (q/k/v, o_proj) and a 1536-row one, 128 x 128 blocks.
      {{1, 4096, 2048}, {1, 3}},
      {{1, 2048, 4096}, {1, 8}},
      {{1, 1536, 2048, 128, 128, true}, {1, 13}},
      // Rows ending inside a scale block, shards starting inside one (col_phase 16 / 64).
      {{1, 200, 1024, 128, 128, false, 64}, {1, 3, 8, 13}},
      {{1, 100, 512, 32, 32, true, 16}, {1, 3, 8, 13}},
      {{1, 45, 160, 32, 32, false, 16}, {1, 8}},
      // Decode batches on the tensor cores (quant_fp8_batched.cu): one and two 32-token blocks, a
      // partial n-tile; rows of their own scale row. (The 96 x 6144 case below at 13 tokens: its
      // scale blocks start 32 columns into the warps' k slices.)
      {{1, 512, 2048}, {8, 32, 40}},
      {{1, 48, 1024, 128, 128, true}, {9, 33}},
      // Long rows: chunks of 16 loads at batch 1, of 8 with a token tile (the last one partial).
      {{1, 77, 8192}, {1, 5}},
      {{1, 96, 6144, 128, 128, false, 32}, {1, 13}},
      // 16-weight loads straddling scale blocks: per-element scales.
      {{1, 70, 160, 32, 32, false, 8}, {1, 3, 13}},
      {{1, 64, 96, 48, 48, true}, {1, 8}},
      {{1, 33, 80, 32, 8, false, 4}, {2}},
  };
  for (const Case& c : cases) {
    const auto W = RandomFp8(c.w);
    for (int64_t T : c.tokens) {
      const auto x = RandomFloats(static_cast<size_t>(T * c.w.cols));
      DeviceBuffer<float> d_x(x), d_y(T * c.w.rows);
      d_y.Poison();
      detail::matmul_fp8(d_y.get(), d_x.get(), W->device, T, nullptr);
      std::vector<float> want(T * c.w.rows);
      ref::matmul_quant(want.data(), x.data(), W->host, T);
      ExpectClose("matmul_fp8 T=" + std::to_string(T) + " " + Describe(c.w), d_y.Download(), want, kBound);
    }
  }
}

TEST(quant_fp8_cuda, DequantizeBf16IsExact) {
  SKIP_WITHOUT_GPU();
  for (const Fp8Case& c : std::vector<Fp8Case>{{1, 256, 2048},
                                               {3, 200, 512, 128, 128, false, 64},
                                               {2, 45, 96, 32, 32, true, 16},
                                               {2, 37, 160, 32, 32, false, 8},
                                               {1, 9, 64, 16, 48, true, 0}}) {
    const auto W = RandomFp8(c);
    const size_t n = static_cast<size_t>(c.count * c.rows * c.cols);
    DeviceBuffer<bf16_bits> d_out(n);
    d_out.Poison();
    detail::dequantize_fp8_bf16(d_out.get(), W->device, nullptr);
    std::vector<bf16_bits> want(n);
    ref::dequantize_bf16(want.data(), W->host);
    const std::vector<bf16_bits> got = d_out.Download();
    size_t mismatches = 0, first = n;
    for (size_t i = 0; i < n; ++i) {
      if (got[i] != want[i] && mismatches++ == 0) first = i;
    }
    std::printf("dequantize_fp8_bf16 %-40s %zu of %zu differ\n", Describe(c).c_str(), mismatches, n);
    EXPECT_EQ(mismatches, 0u) << Describe(c) << ": first at " << first << ", " << (first < n ? got[first] : 0)
                              << " vs " << (first < n ? want[first] : 0);
  }
}

// The split form (the float32-grade prefill, ModelLoadOptions::cuda_quant_prefill_split): hi equal
// to the plain dequantization bit for bit, lo to the reference's bf16(W - hi), and hi + lo within
// 2^-17 of the float32 weight (the split's own error is at most 2^-18).
TEST(quant_fp8_cuda, DequantizeBf16Split) {
  SKIP_WITHOUT_GPU();
  for (const Fp8Case& c :
       std::vector<Fp8Case>{{1, 256, 2048}, {2, 45, 96, 32, 32, true, 16}, {1, 9, 64, 16, 48, true, 0}}) {
    const auto W = RandomFp8(c);
    const size_t n = static_cast<size_t>(c.count * c.rows * c.cols);
    DeviceBuffer<bf16_bits> d_hi(n), d_lo(n), d_plain(n);
    d_hi.Poison();
    d_lo.Poison();
    d_plain.Poison();
    detail::dequantize_fp8_bf16(d_hi.get(), W->device, nullptr, d_lo.get());
    detail::dequantize_fp8_bf16(d_plain.get(), W->device, nullptr);
    std::vector<bf16_bits> want_hi(n), want_lo(n);
    ref::dequantize_bf16(want_hi.data(), W->host, want_lo.data());
    const std::vector<bf16_bits> hi = d_hi.Download(), lo = d_lo.Download(), plain = d_plain.Download();
    size_t bad = 0, nonzero_lo = 0;
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      bad += hi[i] != want_hi[i] || lo[i] != want_lo[i] || hi[i] != plain[i];
      nonzero_lo += (lo[i] & 0x7fff) != 0;
      const int64_t e = static_cast<int64_t>(i) / (c.rows * c.cols), r = (static_cast<int64_t>(i) / c.cols) % c.rows,
                    col = static_cast<int64_t>(i) % c.cols;
      const double w = DequantAt(W->host, e, r, col);
      const double split = static_cast<double>(Bf16ToFloat(hi[i])) + Bf16ToFloat(lo[i]);
      if (w != 0) worst = std::max(worst, std::abs(split - w) / std::abs(w));
    }
    std::printf("dequantize_fp8_bf16 split %-40s %zu of %zu differ, %zu lo nonzero, max |W - hi - lo| / |W| = %.3g\n",
                Describe(c).c_str(), bad, n, nonzero_lo, worst);
    EXPECT_EQ(bad, 0u) << Describe(c);
    EXPECT_GT(nonzero_lo, 0u) << "float32 block scales make most weights inexact in bf16: lo cannot be all zero";
    EXPECT_LE(worst, std::ldexp(1.0, -17)) << Describe(c);
  }
}

TEST(quant_fp8_cuda, MoeExperts) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t T, E, K, H, I;
    Fp8Case gate_up, down;  // count / rows / cols filled in below
  };
  const std::vector<Case> cases = {
      // Qwen3-30B-A3B's expert at TP 1 (K = 8, 128 x 128 blocks; 16 of its 128 experts keep the
      // reference's float32 copy of the stack small), and 128 smaller experts.
      {1, 16, 8, 2048, 768, {}, {}},
      {8, 128, 8, 512, 128, {}, {}},
      // The expert at TP 4 (I = 192 cuts a 128-block: one scale row per weight row, the down
      // shard starting 64 columns into a block).
      {13, 64, 8, 1024, 192, {1, 0, 0, 128, 128, true}, {1, 0, 0, 128, 128, false, 64}},
      // K = 9 (a warp takes two slots), 32-blocks, a partial last down block.
      {3, 16, 9, 256, 96, {1, 0, 0, 32, 32}, {1, 0, 0, 32, 32, true, 16}},
      // Per-element scales in both products.
      {2, 33, 9, 128, 48, {1, 0, 0, 32, 48, true}, {1, 0, 0, 32, 32, false, 8}},
      // The TP 4 expert at one token (a scale row per row, the down shard 64 columns into a block),
      // 64-blocks with K = 9 and a down row of 80 columns, 32-blocks in both products, and K = 4.
      {1, 64, 8, 1024, 192, {1, 0, 0, 128, 128, true}, {1, 0, 0, 128, 128, false, 64}},
      {5, 16, 9, 320, 80, {1, 0, 0, 64, 64}, {1, 0, 0, 64, 64, true}},
      {4, 16, 8, 256, 96, {1, 0, 0, 32, 32}, {1, 0, 0, 32, 32, true}},
      {2, 8, 4, 2048, 768, {}, {}},
      // More pairs (65600) than a grid has rows: moe_gate_up launches once per 65535.
      {8200, 16, 8, 32, 16, {1, 0, 0, 32, 32}, {1, 0, 0, 32, 32}},
  };
  for (Case c : cases) {
    c.gate_up.count = c.down.count = c.E;
    c.gate_up.rows = 2 * c.I, c.gate_up.cols = c.H;
    c.down.rows = c.H, c.down.cols = c.I;
    const auto gate_up = RandomFp8(c.gate_up);
    const auto down = RandomFp8(c.down);
    const int64_t T = c.T, K = c.K;
    const auto x = RandomFloats(T * c.H);
    const std::vector<float> weights = RandomFloats(T * K);
    const std::vector<int32_t> ids = RandomExpertIds(T, c.E, K);
    DeviceBuffer<float> d_x(x), d_w(weights), d_act(T * K * c.I), d_out(T * c.H);
    DeviceBuffer<int32_t> d_ids(ids);
    const std::string tag = Shape({T, c.E, K, c.H, c.I}) + " gate_up " + Describe(c.gate_up) + ", down " +
                            Describe(c.down);
    d_act.Poison();
    detail::moe_gate_up_fp8(d_act.get(), d_x.get(), d_ids.get(), gate_up->device, T, K, nullptr);
    std::vector<float> act(T * K * c.I), out(T * c.H);
    ref::moe_gate_up_quant(act.data(), x.data(), ids.data(), gate_up->host, T, K);
    ExpectClose("moe_gate_up_fp8 " + tag, d_act.Download(), act, kBound);
    // moe_down from the reference activations, so each kernel is checked on its own.
    d_act.Upload(act);
    d_out.Poison();
    detail::moe_down_fp8(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), down->device, T, K, nullptr, false);
    ref::moe_down_quant(out.data(), act.data(), ids.data(), weights.data(), down->host, T, K);
    ExpectClose("moe_down_fp8 " + tag, d_out.Download(), out, kBound);
    // Right after moe_gate_up (the engine's order): weights loaded before the wait, same result;
    // that moe_gate_up asks the L2 for another weight (the down stack) as a one-token step does.
    d_act.Poison();
    detail::moe_gate_up_fp8(d_act.get(), d_x.get(), d_ids.get(), gate_up->device, T, K, nullptr,
                            L2Prefetch{down->device.data, down->device.count * down->device.data_bytes()});
    ExpectClose("moe_gate_up_fp8 with an L2 prefetch " + tag, d_act.Download(), act, kBound);
    d_out.Poison();
    detail::moe_down_fp8(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), down->device, T, K, nullptr, true);
    ExpectClose("moe_down_fp8 after moe_gate_up " + tag, d_out.Download(), out, kBound);
  }
}

}  // namespace
}  // namespace tandem::kernels
