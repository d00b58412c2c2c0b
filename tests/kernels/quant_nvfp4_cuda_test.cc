// The NVFP4 kernels (kernels/quant_nvfp4.cu behind quant_matmul.h / quant_moe.h) against the float32
// references of kernels/quant_matmul_ref.cc, on fresh random weights with poisoned outputs: random
// code bytes (every e2m1 code occurs, both nibbles), positive e4m3 group scales (never NaN), random
// row scales. Shapes with cols % 32 == 16 (a row then starts on 8 bytes: the kernels' narrow-load
// path), rows in several rounds of loads, T = 1, 3, 8, 13 (two token tiles), experts with K = 8 and 9,
// and T = 8 to 40 on the decode-batch tensor-core kernel (quant_nvfp4_batched.cu).
// Bound: ||out - ref|| / ||ref|| < 1e-4. The kernels multiply the exact dequantized weights (the
// codes and scales are exact in float32; the kernel applies the scales per 16-group instead of per
// weight, a reordering within float rounding) by x in float32, so the error is float32 accumulation
// over at most 6144 terms: about sqrt(n) * 2^-24 ~ 1e-5 relative for random signs. One wrong code
// in 16 or a wrong scale moves the result by percent. The experts' products of 2 to 8 tokens sum a
// group in half precision and are held to kHalfSumsBound (2e-3) instead. Dequantization to bf16 must
// equal the reference bit for bit (both round the same float32 value to nearest even).
// Skips (with the reason) where no GPU is present.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/quant_matmul.h"
#include "kernels/quant_moe.h"
#include "kernels/quant_nvfp4.cuh"
#include "kernels/quant_weight.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/quant_stacks.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomFloats;
using testing::Rng;
using testing::SplitOrdered;
using testing::Shape;
using testing::Nvfp4Stack;
using testing::RandomExpertIds;

constexpr double kBound = 1e-4;
// The experts' products of 2 to 8 tokens with 16-byte loads (the split kernels) sum each group's 16
// products in half precision (x scaled by a power of two and rounded to half, each product and each
// of a lane's 8 adds rounded to half: about 2^-11 relative a term), then scale and add the groups in
// float32; measured 7e-4 to 9e-4 on an H100.
constexpr double kHalfSumsBound = 2e-3;
double ExpertsBound(int64_t T) { return T >= 2 && T <= 8 ? kHalfSumsBound : kBound; }

// Calls check(w) for every byte value in every byte of a word, beside other bytes that vary, so a
// code leaking into a neighbour's bits shows.
template <typename Check>
void ForEveryByteInEveryPosition(uint32_t seed, Check&& check) {
  for (int pos = 0; pos < 4; ++pos) {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t others = seed ^ (b * 0x01010101u) ^ (0xffu << (8 * pos));
      check((others & ~(0xffu << (8 * pos))) | (b << (8 * pos)));
    }
  }
}

TEST(quant_nvfp4_cuda, E2m1x8ToFloatMatchesE2m1ToFloat) {  // host only: nibble order and values
  // Each float must be E2m1ToFloat(nibble i) * 2^-14, signed zero included.
  ForEveryByteInEveryPosition(0x9d3f61e7u, [](uint32_t w) {
    float got[8];
    E2m1x8ToFloat(w, got);
    for (int i = 0; i < 8; ++i) {
      const float want = E2m1ToFloat(static_cast<uint8_t>((w >> (4 * i)) & 0xfu)) * 0x1p-14f;
      EXPECT_EQ(got[i], want) << "word " << std::hex << w << " column " << i;
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << "word " << std::hex << w << " column " << i;
    }
  });
}

TEST(quant_nvfp4_cuda, E4m3x2HalfBitsPlacesEachScaleAsItsHalf) {  // host only
  // Every pair of scale bytes: half k must be byte k's ((b & 0x7f) << 7) | ((b & 0x80) << 8), bit for
  // bit, and its value e4m3(b) * 2^-8 (NaN code aside).
  const auto half_bits = [](uint32_t b) { return ((b & 0x7fu) << 7) | ((b & 0x80u) << 8); };
  for (uint32_t sc = 0; sc < 65536; ++sc) {
    const uint32_t h = E4m3x2HalfBits(sc);
    ASSERT_EQ(h, half_bits(sc & 0xffu) | (half_bits(sc >> 8) << 16)) << "scales " << std::hex << sc;
    ASSERT_EQ(E4m3x2HalfBits(sc | (sc * 0x9e370000u) | 0x00ff0000u), h) << "high bits read, scales " << std::hex << sc;
    const float2 f = HalfBitsToFloat2(h);
    for (int k = 0; k < 2; ++k) {
      const uint8_t b = static_cast<uint8_t>(sc >> (8 * k));
      if ((b & 0x7f) == 0x7f) continue;
      ASSERT_EQ(k == 0 ? f.x : f.y, E4m3ToFloat(b) * 0x1p-8f) << "scales " << std::hex << sc << " byte " << k;
    }
  }
}

TEST(quant_nvfp4_cuda, E2m1x8ToHalfPairsSpreadPlacesEachCodeAsItsHalf) {  // host only
  // The tensor-core kernels' pairs (0, 4), (1, 5), (2, 6), (3, 7): each half must be the code's
  // ((c & 7) << 9) | ((c & 8) << 12), bit for bit.
  const auto half_bits = [](uint32_t c) { return ((c & 7u) << 9) | ((c & 8u) << 12); };
  ForEveryByteInEveryPosition(0x6a1c93f5u, [&](uint32_t w) {
    uint32_t h[4];
    E2m1x8ToHalfPairsSpread(w, h);
    for (int k = 0; k < 4; ++k) {
      const uint32_t want = half_bits((w >> (4 * k)) & 0xfu) | (half_bits((w >> (4 * (k + 4))) & 0xfu) << 16);
      EXPECT_EQ(h[k], want) << "word " << std::hex << w << " pair " << k;
    }
  });
}

// Every e2m1 code occurs as a low and as a high nibble (the inputs exercise the whole decoder).
void ExpectAllCodes(const std::vector<uint8_t>& data) {
  uint32_t lo = 0, hi = 0;
  for (uint8_t b : data) lo |= 1u << (b & 0xf), hi |= 1u << (b >> 4);
  EXPECT_EQ(lo, 0xffffu);
  EXPECT_EQ(hi, 0xffffu);
}

// Microseconds per call of f(i) over `reps` calls (i = 0, 1, ...), after one warm-up round.
template <typename F>
double MicrosPerCall(int reps, F&& f) {
  for (int i = 0; i < reps; ++i) f(i);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) f(i);
  CUDA_CHECK(cudaEventRecord(stop));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return 1000.0 * ms / reps;
}

TEST(quant_nvfp4_cuda, Matmul) {
  SKIP_WITHOUT_GPU();
  // (T, cols, rows): cols 16/48/4112 take 8-byte loads; 1056 and 6144 need a second round of loads
  // (6144 at T > 1 a third); 4096 x 2048 and 2048 x 4096 the decode shapes.
  for (auto [T, cols, rows] : std::vector<std::array<int64_t, 3>>{
           {1, 16, 37},    {3, 16, 64},     {1, 32, 100},   {8, 48, 77},     {13, 48, 50},   {1, 2048, 4096},
           {3, 2048, 512}, {8, 2048, 300},  {13, 2048, 130}, {1, 4096, 2048}, {8, 4096, 256}, {13, 4096, 96},
           {1, 768, 2048}, {1, 2048, 128},  {1, 6144, 129},  {5, 6144, 40},   {1, 1056, 70},  {3, 4112, 20},
           {2, 4096, 33},  {1, 2048, 5120},
           // From 8 tokens, cols % 64 == 0 and rows % 16 == 0: the tensor-core kernel (one and two
           // 32-token blocks, one and two row groups a block, a single 64-column span, uneven warp slices).
           {8, 2048, 4096}, {32, 2048, 512}, {40, 4096, 64}, {16, 1024, 48}, {33, 192, 32}, {9, 64, 16}}) {
    Nvfp4Stack W(1, rows, cols);
    ExpectAllCodes(W.data);
    auto x = RandomFloats(T * cols);
    DeviceBuffer<float> d_x(x), d_y(T * rows);
    d_y.Poison();
    matmul_quant(d_y.get(), d_x.get(), W.device, T, nullptr);
    std::vector<float> want(T * rows);
    ref::matmul_quant(want.data(), x.data(), W.host, T);
    ExpectClose("matmul_nvfp4 " + Shape({T, cols, rows}), d_y.Download(), want, kBound);
  }
}

TEST(quant_nvfp4_cuda, DequantizeBf16) {
  SKIP_WITHOUT_GPU();
  for (auto [count, rows, cols] : std::vector<std::array<int64_t, 3>>{
           {1, 37, 16}, {3, 20, 48}, {4, 64, 2048}, {2, 33, 4112}, {16, 96, 768}}) {
    Nvfp4Stack W(count, rows, cols);
    const int64_t n = count * rows * cols;
    DeviceBuffer<bf16_bits> d_out(n);
    d_out.Poison();
    dequantize_bf16(d_out.get(), W.device, nullptr);
    std::vector<bf16_bits> want(n);
    ref::dequantize_bf16(want.data(), W.host);
    const std::vector<bf16_bits> got = d_out.Download();
    int64_t mismatches = 0, first = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (got[i] != want[i]) {
        if (first < 0) first = i;
        ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0) << "dequantize_bf16 " << Shape({count, rows, cols}) << ": first at " << first << " got "
                             << (first >= 0 ? got[first] : 0) << " want " << (first >= 0 ? want[first] : 0);
    std::printf("dequantize_bf16 nvfp4 %-24s %lld of %lld values differ\n", Shape({count, rows, cols}).c_str(),
                static_cast<long long>(mismatches), static_cast<long long>(n));
  }
}

// The split form (the float32-grade prefill, ModelLoadOptions::cuda_quant_prefill_split): hi equal
// to the plain dequantization bit for bit, lo to the reference's bf16(W - hi), and hi + lo within
// 2^-17 of the float32 weight (the split's own error is at most 2^-18).
TEST(quant_nvfp4_cuda, DequantizeBf16Split) {
  SKIP_WITHOUT_GPU();
  for (auto [count, rows, cols] : std::vector<std::array<int64_t, 3>>{{1, 37, 16}, {3, 20, 48}, {16, 96, 768}}) {
    Nvfp4Stack W(count, rows, cols);
    const int64_t n = count * rows * cols;
    DeviceBuffer<bf16_bits> d_hi(n), d_lo(n), d_plain(n);
    d_hi.Poison();
    d_lo.Poison();
    d_plain.Poison();
    dequantize_bf16(d_hi.get(), W.device, nullptr, d_lo.get());
    dequantize_bf16(d_plain.get(), W.device, nullptr);
    std::vector<bf16_bits> want_hi(n), want_lo(n);
    ref::dequantize_bf16(want_hi.data(), W.host, want_lo.data());
    const std::vector<bf16_bits> hi = d_hi.Download(), lo = d_lo.Download(), plain = d_plain.Download();
    int64_t bad = 0, nonzero_lo = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      bad += hi[i] != want_hi[i] || lo[i] != want_lo[i] || hi[i] != plain[i];
      nonzero_lo += (lo[i] & 0x7fff) != 0;
      const int64_t e = i / (rows * cols), r = (i / cols) % rows, c = i % cols;
      const double w = DequantAt(W.host, e, r, c);
      const double split = static_cast<double>(Bf16ToFloat(hi[i])) + Bf16ToFloat(lo[i]);
      if (w != 0) worst = std::max(worst, std::abs(split - w) / std::abs(w));
    }
    std::printf("dequantize_bf16 split nvfp4 %-20s %lld of %lld differ, %lld lo nonzero, max |W - hi - lo| / |W| = "
                "%.3g\n",
                Shape({count, rows, cols}).c_str(), static_cast<long long>(bad), static_cast<long long>(n),
                static_cast<long long>(nonzero_lo), worst);
    EXPECT_EQ(bad, 0) << Shape({count, rows, cols});
    EXPECT_GT(nonzero_lo, 0) << "the row scales make some weights inexact in bf16: lo cannot be all zero";
    EXPECT_LE(worst, std::ldexp(1.0, -17)) << Shape({count, rows, cols});
  }
}

TEST(quant_nvfp4_cuda, MoeExperts) {
  SKIP_WITHOUT_GPU();
  // (T, E, K, H, I): Qwen3-30B-A3B's H and I (at E = 16: the reference dequantizes the whole stack),
  // its I at TP 2, K = 9 (two slots on one warp of moe_down), H, I = 48, 80 (8-byte loads), K = 4
  // with I = 192, and H = 16896: gate/up rows of 528 loads, two rounds of 2 loads a lane (every
  // other shape covers its rows in one round, the form capped at 80 registers).
  for (auto [T, E, K, H, I] : std::vector<std::array<int64_t, 5>>{{7, 16, 8, 128, 64},   {1, 16, 8, 2048, 768},
                                                                 {9, 16, 8, 2048, 768},  {3, 64, 9, 2048, 384},
                                                                 {2, 16, 9, 48, 80},     {1, 128, 8, 256, 64},
                                                                 {4, 128, 9, 4096, 32},  {2, 16, 4, 1024, 192},
                                                                 {1, 16, 8, 16896, 64}}) {
    Nvfp4Stack gate_up(E, 2 * I, H), down(E, H, I);
    auto x = RandomFloats(T * H);
    const std::vector<int32_t> ids = RandomExpertIds(T, E, K);
    std::vector<float> weights = RandomFloats(T * K);
    DeviceBuffer<float> d_x(x), d_w(weights), d_act(T * K * I), d_out(T * H);
    DeviceBuffer<int32_t> d_ids(ids);
    d_act.Poison();
    d_out.Poison();
    moe_gate_up_quant(d_act.get(), d_x.get(), d_ids.get(), gate_up.device, T, K, nullptr);
    std::vector<float> act(T * K * I), out(T * H);
    ref::moe_gate_up_quant(act.data(), x.data(), ids.data(), gate_up.host, T, K);
    const std::string tag = Shape({T, E, K, H, I});
    ExpectClose("moe_gate_up_nvfp4 " + tag, d_act.Download(), act, ExpertsBound(T));
    // moe_down from the reference activations, so each kernel is checked on its own.
    d_act.Upload(act);
    moe_down_quant(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), down.device, T, K, nullptr);
    ref::moe_down_quant(out.data(), act.data(), ids.data(), weights.data(), down.host, T, K);
    ExpectClose("moe_down_nvfp4 " + tag, d_out.Download(), out, ExpertsBound(T));
    // Right after moe_gate_up (the engine's order): weights loaded before the wait, same result;
    // that moe_gate_up asks the L2 for another weight (the down stack) as a one-token step does.
    d_act.Poison();
    moe_gate_up_quant(d_act.get(), d_x.get(), d_ids.get(), gate_up.device, T, K, nullptr,
                      L2Prefetch{down.device.data, down.device.count * down.device.data_bytes()});
    ExpectClose("moe_gate_up_nvfp4 with an L2 prefetch " + tag, d_act.Download(), act, ExpertsBound(T));
    d_out.Poison();
    moe_down_quant(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), down.device, T, K, nullptr, true);
    ExpectClose("moe_down_nvfp4 after moe_gate_up " + tag, d_out.Download(), out, ExpertsBound(T));
    if (T == 1 && H % 32 == 0) {
      // x in split order (as the router's kernel leaves it for one token): the same products in the
      // same order, so the same bits as from row-order x; x itself poisoned so it cannot be read.
      const std::vector<float> row_order = d_act.Download();
      DeviceBuffer<float> d_xs(SplitOrdered(x.data(), H)), d_poison(T * H);
      d_poison.Poison();
      d_act.Poison();
      moe_gate_up_quant(d_act.get(), d_poison.get(), d_ids.get(), gate_up.device, T, K, nullptr, L2Prefetch{},
                        d_xs.get());
      EXPECT_EQ(d_act.Download(), row_order) << "moe_gate_up_nvfp4 over split-order x " << tag;
      // And act in split order between the two products (where moe_act_split allows it): every row
      // rearranged, the same bits; down over it the same bits as over row-order act.
      if (moe_act_split(gate_up.device, down.device, T)) {
        d_act.Poison();
        moe_gate_up_quant(d_act.get(), d_poison.get(), d_ids.get(), gate_up.device, T, K, nullptr, L2Prefetch{},
                          d_xs.get(), /*act_split=*/true);
        const std::vector<float> split_act = d_act.Download();
        for (int64_t k = 0; k < K; ++k) {
          const std::vector<float> want = SplitOrdered(row_order.data() + k * I, I);
          EXPECT_TRUE(std::equal(want.begin(), want.end(), split_act.begin() + k * I))
              << "moe_gate_up_nvfp4's act in split order, slot " << k << " " << tag;
        }
        const std::vector<float> row_out = d_out.Download();
        d_out.Poison();
        moe_down_quant(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), down.device, T, K, nullptr, true,
                       /*act_split=*/true);
        EXPECT_EQ(d_out.Download(), row_out) << "moe_down_nvfp4 over split-order act " << tag;
      }
    }
  }
}

// Activations of 2000-6000 in some columns among values of about 1, past the largest half, through
// the experts' half2 sums (2 tokens): each group's x is scaled by a power of two from its own largest
// magnitude before it is rounded, so nothing overflows and the result matches.
TEST(quant_nvfp4_cuda, MoeExpertsLargeActivations) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 2, E = 16, K = 8, H = 2048, I = 768;
  Nvfp4Stack gate_up(E, 2 * I, H), down(E, H, I);
  const auto large = [](std::vector<float> v) {
    for (size_t c = 5; c < v.size(); c += 97) v[c] = (c % 2 ? 1.0f : -1.0f) * (2000.0f + static_cast<float>(c % 4000));
    return v;
  };
  const auto x = large(RandomFloats(T * H));
  const std::vector<int32_t> ids = RandomExpertIds(T, E, K);
  const std::vector<float> weights = RandomFloats(T * K);
  std::vector<float> act(T * K * I), out(T * H);
  ref::moe_gate_up_quant(act.data(), x.data(), ids.data(), gate_up.host, T, K);
  DeviceBuffer<float> d_x(x), d_w(weights), d_act(T * K * I), d_out(T * H);
  DeviceBuffer<int32_t> d_ids(ids);
  d_act.Poison();
  moe_gate_up_quant(d_act.get(), d_x.get(), d_ids.get(), gate_up.device, T, K, nullptr);
  ExpectClose("moe_gate_up_nvfp4 large x", d_act.Download(), act, kHalfSumsBound);
  act = large(act);
  ref::moe_down_quant(out.data(), act.data(), ids.data(), weights.data(), down.host, T, K);
  d_act.Upload(act);
  d_out.Poison();
  moe_down_quant(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), down.device, T, K, nullptr);
  ExpectClose("moe_down_nvfp4 large activations", d_out.Download(), out, kHalfSumsBound);
}

// Batch-1 decode times against the bf16 kernels on the same shapes (printed for the lead's GPU runs;
// the check is the NVFP4 result). Every call reads other weights (copies, or other experts), more
// than the L2 holds, so the times are memory-bound like a decode step's. Target: about 0.28 of the
// bf16 time (4.5 bits a weight against 16).
TEST(quant_nvfp4_cuda, DecodeTimesVsBf16) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t kCopies = 16;  // 16 x 16 MB of bf16 weights per shape: past any L2
  for (auto [rows, cols] : std::vector<std::array<int64_t, 2>>{{4096, 2048}, {2048, 4096}, {5120, 2048}}) {
    Nvfp4Stack W(kCopies, rows, cols);
    DeviceBuffer<bf16_bits> d_bf16(kCopies * rows * cols);  // the values do not matter to the time
    d_bf16.Poison();
    auto x = RandomFloats(cols);
    DeviceBuffer<float> d_x(x), d_y(rows);
    const auto matrix = [&](int i) {
      QuantMatrix m = W.device;
      const int64_t e = i % kCopies;
      m.count = 1;
      m.data = static_cast<const uint8_t*>(W.device.data) + e * m.data_bytes();
      m.group_scales += e * m.group_scale_stride();
      m.row_scale2 += e * m.row_scale2_stride();
      return m;
    };
    const int reps = 4 * kCopies;
    const double q = MicrosPerCall(reps, [&](int i) { matmul_quant(d_y.get(), d_x.get(), matrix(i), 1, nullptr); });
    const double b = MicrosPerCall(reps, [&](int i) {
      matvec_bf16(d_y.get(), d_x.get(), d_bf16.get() + (i % kCopies) * rows * cols, 1, cols, rows, nullptr);
    });
    const double gb = static_cast<double>(W.device.matrix_bytes()) / (q * 1e3);  // one matrix, with its scales
    std::printf("matmul %-14s T=1: nvfp4 %.2f us (%.0f GB/s), bf16 %.2f us (%.0f GB/s): %.2fx the bf16 time\n",
                Shape({rows, cols}).c_str(), q, gb, b, rows * cols * 2 / (b * 1e3), q / b);
    d_y.Poison();
    matmul_quant(d_y.get(), d_x.get(), matrix(3), 1, nullptr);
    QuantMatrix host = W.host;
    host.count = 1;
    host.data = W.data.data() + 3 * host.data_bytes();
    host.group_scales += 3 * host.group_scale_stride();
    host.row_scale2 += 3 * host.row_scale2_stride();
    std::vector<float> want(rows);
    ref::matmul_quant(want.data(), x.data(), host, 1);
    ExpectClose("matmul_nvfp4 copy 3 " + Shape({rows, cols}), d_y.Download(), want, kBound);
  }
  // Qwen3-30B-A3B's experts at batch 1: each call routes to other experts (64 id sets).
  const int64_t E = 128, K = 8, H = 2048, I = 768, kSets = 64;
  Nvfp4Stack gate_up(E, 2 * I, H), down(E, H, I);
  DeviceBuffer<bf16_bits> d_gu(E * 2 * I * H), d_down(E * H * I);
  d_gu.Poison(), d_down.Poison();
  const std::vector<int32_t> ids = RandomExpertIds(kSets, E, K);
  const auto x = RandomFloats(H), weights = RandomFloats(K);
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<float> d_x(x), d_w(weights), d_act(K * I), d_out(H);
  const double q = MicrosPerCall(kSets, [&](int i) {
    moe_gate_up_quant(d_act.get(), d_x.get(), d_ids.get() + i * K, gate_up.device, 1, K, nullptr);
    moe_down_quant(d_out.get(), d_act.get(), d_ids.get() + i * K, d_w.get(), down.device, 1, K, nullptr, true);
  });
  const double b = MicrosPerCall(kSets, [&](int i) {
    moe_gate_up(d_act.get(), d_x.get(), d_ids.get() + i * K, d_gu.get(), 1, K, H, I, nullptr);
    moe_down(d_out.get(), d_act.get(), d_ids.get() + i * K, d_w.get(), d_down.get(), 1, K, H, I, nullptr, true);
  });
  std::printf("moe_gate_up + moe_down (E %lld, K %lld, H %lld, I %lld) T=1: nvfp4 %.2f us, bf16 %.2f us: %.2fx\n",
              static_cast<long long>(E), static_cast<long long>(K), static_cast<long long>(H),
              static_cast<long long>(I), q, b, q / b);
  // The check routes to experts 0..7 only, so the references dequantize those 8 (count = 8).
  const std::vector<int32_t> ids8 = RandomExpertIds(1, K, K);
  DeviceBuffer<int32_t> d_ids8(ids8);
  d_out.Poison();
  moe_gate_up_quant(d_act.get(), d_x.get(), d_ids8.get(), gate_up.device, 1, K, nullptr);
  moe_down_quant(d_out.get(), d_act.get(), d_ids8.get(), d_w.get(), down.device, 1, K, nullptr, true);
  QuantMatrix gu8 = gate_up.host, down8 = down.host;
  gu8.count = down8.count = K;
  std::vector<float> act(K * I), out(H);
  ref::moe_gate_up_quant(act.data(), x.data(), ids8.data(), gu8, 1, K);
  ref::moe_down_quant(out.data(), act.data(), ids8.data(), weights.data(), down8, 1, K);
  ExpectClose("moe nvfp4 experts " + Shape({1, E, K, H, I}), d_out.Download(), out, kBound);
}

}  // namespace
}  // namespace tandem::kernels
