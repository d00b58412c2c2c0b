// The split products of the quantized weights' float32-grade prefill
// (ModelLoadOptions::cuda_quant_prefill_split): kernels/gemm.h gemm_bf16_split with w_lo and
// kernels/moe_gemm.h's grouped GEMMs with lo, against double-accumulated references over the
// float32 weights, on weights that bf16 does not hold exactly (random float32 values, as a
// dequantized FP8 block or an NVFP4 row scale makes them). The weights are split on the host as
// dequantize_bf16 splits them (hi = bf16(W), lo = bf16(W - hi); quant_fp8_cuda_test and
// quant_nvfp4_cuda_test check that split). In a file of its own rather than gemm_cuda_test: these
// are the quantized prefill's products.
//
// Bound: 3e-5 of the largest output (x and W each within 2^-16 of their float32 values, the lo*lo
// term left out, float32 accumulation in the tensor cores' order). Measured on the H200 (session
// 19): 4.4e-6..1.4e-5, the largest on gate_up, whose silu(gate) * up carries both products' errors;
// a first bound of 1e-5 failed there. The same kernels given only hi (W rounded to bf16, as the
// default prefill does) measured 1.7e-3..5.8e-3, more than 10x the bound: the test tells the split
// from the rounded product. Each result is
// also computed twice and must repeat bit for bit. Skips (with the reason) where no GPU is present.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "kernels/gemm.h"
#include "kernels/moe_gemm.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::RandomFloats;
using testing::Rng;
using testing::MaxRelError;
using testing::SameBits;
using testing::Shape;
using testing::WideChannelFloats;

constexpr double kSplitBound = 3e-5;

// A float32 weight and its bf16 split.
struct SplitHost {
  std::vector<float> w;
  std::vector<bf16_bits> hi, lo;
};

SplitHost RandomSplitWeight(int64_t n, float scale) {
  SplitHost s;
  s.w = RandomFloats(n, scale);
  s.hi.resize(n);
  s.lo.resize(n);
  int64_t inexact = 0;
  for (int64_t i = 0; i < n; ++i) {
    s.hi[i] = FloatToBf16(s.w[i]);
    s.lo[i] = FloatToBf16(s.w[i] - Bf16ToFloat(s.hi[i]));
    inexact += (s.lo[i] & 0x7fff) != 0;
  }
  EXPECT_GT(inexact, n / 2) << "the weights must be inexact in bf16 for the test to tell the split apart";
  return s;
}

TEST(quant_prefill_cuda, DenseSplitWeightsKeepFloat32) {
  SKIP_WITHOUT_GPU();
  // (T, in, out): the tiny fixtures' q|k|v at prompt3's 150 tokens; Qwen3-30B-A3B's q|k|v and
  // o_proj at prefill lengths; a ragged one (T, in and out off every tile).
  for (auto [T, in, out] : std::vector<std::array<int64_t, 3>>{
           {150, 128, 512}, {64, 2048, 5120}, {512, 4096, 2048}, {333, 776, 37}}) {
    const std::string tag = Shape({T, in, out});
    const auto x = WideChannelFloats(T, in);
    const SplitHost w = RandomSplitWeight(out * in, 0.05f);
    std::vector<float> want(T * out);
    engine::cpu::matmul<double>(nullptr, want.data(), x.data(), w.w.data(), T, in, out);
    DeviceBuffer<float> d_x(x), d_y(T * out);
    DeviceBuffer<bf16_bits> d_hi(w.hi), d_lo(w.lo);

    d_y.Poison();
    ASSERT_TRUE(gemm_bf16_split(d_y.get(), d_x.get(), d_hi.get(), T, in, out, nullptr, d_lo.get()))
        << "cuBLAS could not be loaded (see the 'tandem kernels:' line on stderr)";
    const auto got = d_y.Download();
    const double split_err = MaxRelError(got, want);
    d_y.Poison();
    gemm_bf16_split(d_y.get(), d_x.get(), d_hi.get(), T, in, out, nullptr, d_lo.get());
    EXPECT_TRUE(SameBits(d_y.Download(), got)) << "gemm_bf16_split with w_lo not deterministic " << tag;
    // The weight rounded to bf16 (hi alone), x still split: what the split adds for W.
    d_y.Poison();
    ASSERT_TRUE(gemm_bf16_split(d_y.get(), d_x.get(), d_hi.get(), T, in, out, nullptr));
    const double hi_err = MaxRelError(d_y.Download(), want);

    std::printf("%-22s max err / max |ref|: split W and x %.3g, bf16 W %.3g (bound %.0e); y[0..2] = %.5f %.5f %.5f "
                "vs ref %.5f %.5f %.5f\n",
                tag.c_str(), split_err, hi_err, kSplitBound, got[0], got[1], got[2], want[0], want[1], want[2]);
    EXPECT_LT(split_err, kSplitBound) << "gemm_bf16_split with w_lo " << tag;
    EXPECT_GT(hi_err, 10 * kSplitBound) << "bf16 weights within 10x the split bound: the test cannot tell " << tag;
  }
}

// Token t's K distinct experts, drawn uniformly (the router's shape of choice).
std::vector<int32_t> UniformRoute(int64_t T, int64_t E, int64_t K) {
  std::vector<int32_t> ids(T * K), perm(E);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    std::copy(perm.begin(), perm.begin() + K, ids.begin() + t * K);
  }
  return ids;
}

TEST(quant_prefill_cuda, MoeGroupedSplitKeepsFloat32) {
  SKIP_WITHOUT_GPU();
  // (T, E, K, H, I): the tiny fixtures at prompt3 (16 experts top 4, H 128, I 64; the hybrid's
  // shared expert as expert 16 of 17, K 5), Qwen3-30B-A3B's shapes with empty experts, and every pair
  // on few experts.
  for (auto [T, E, K, H, I] : std::vector<std::array<int64_t, 5>>{
           {150, 16, 4, 128, 64}, {150, 17, 5, 128, 64}, {37, 128, 8, 2048, 768}, {200, 4, 2, 256, 128}}) {
    const std::string tag = Shape({T, E, K, H, I});
    const auto x = WideChannelFloats(T, H);
    const SplitHost gate_up = RandomSplitWeight(E * 2 * I * H, 0.05f), down = RandomSplitWeight(E * H * I, 0.05f);
    const std::vector<int32_t> ids = UniformRoute(T, E, K);
    const std::vector<float> weights = RandomFloats(T * K);
    std::vector<float> act(T * K * I), out(T * H);
    engine::cpu::moe_gate_up<double>(nullptr, act.data(), x.data(), ids.data(), gate_up.w.data(), T, K, H, I);
    engine::cpu::moe_down<double>(nullptr, out.data(), act.data(), ids.data(), weights.data(), down.w.data(), T, K, H,
                                  I);
    DeviceBuffer<float> d_x(x), d_wts(weights), d_act(T * K * I), d_out(T * H);
    DeviceBuffer<bf16_bits> d_gu_hi(gate_up.hi), d_gu_lo(gate_up.lo), d_down_hi(down.hi), d_down_lo(down.lo);
    DeviceBuffer<int32_t> d_ids(ids);

    d_act.Poison();
    ASSERT_TRUE(moe_gate_up_grouped(d_act.get(), d_x.get(), d_ids.get(), d_gu_hi.get(), T, K, H, I, nullptr,
                                    d_gu_lo.get()))
        << tag;
    const auto got_act = d_act.Download();
    const double act_err = MaxRelError(got_act, act);
    d_act.Poison();
    moe_gate_up_grouped(d_act.get(), d_x.get(), d_ids.get(), d_gu_hi.get(), T, K, H, I, nullptr, d_gu_lo.get());
    EXPECT_TRUE(SameBits(d_act.Download(), got_act)) << "moe_gate_up_grouped split not deterministic " << tag;
    d_act.Poison();
    ASSERT_TRUE(moe_gate_up_grouped(d_act.get(), d_x.get(), d_ids.get(), d_gu_hi.get(), T, K, H, I, nullptr));
    const double act_rounded_err = MaxRelError(d_act.Download(), act);

    // moe_down from the reference activations, so each kernel is checked on its own.
    d_act.Upload(act);
    d_out.Poison();
    ASSERT_TRUE(moe_down_grouped(d_out.get(), d_act.get(), d_ids.get(), d_wts.get(), d_down_hi.get(), T, K, H, I,
                                 nullptr, d_down_lo.get()))
        << tag;
    const auto got_out = d_out.Download();
    const double out_err = MaxRelError(got_out, out);
    d_out.Poison();
    moe_down_grouped(d_out.get(), d_act.get(), d_ids.get(), d_wts.get(), d_down_hi.get(), T, K, H, I, nullptr,
                     d_down_lo.get());
    EXPECT_TRUE(SameBits(d_out.Download(), got_out)) << "moe_down_grouped split not deterministic " << tag;
    d_out.Poison();
    ASSERT_TRUE(moe_down_grouped(d_out.get(), d_act.get(), d_ids.get(), d_wts.get(), d_down_hi.get(), T, K, H, I,
                                 nullptr));
    const double out_rounded_err = MaxRelError(d_out.Download(), out);

    std::printf("%-26s max err / max |ref|: gate_up split %.3g (rounded %.3g), down split %.3g (rounded %.3g), "
                "bound %.0e; act[0..1] = %.5f %.5f vs ref %.5f %.5f\n",
                tag.c_str(), act_err, act_rounded_err, out_err, out_rounded_err, kSplitBound, got_act[0], got_act[1],
                act[0], act[1]);
    EXPECT_LT(act_err, kSplitBound) << "moe_gate_up_grouped split " << tag;
    EXPECT_LT(out_err, kSplitBound) << "moe_down_grouped split " << tag;
    EXPECT_GT(act_rounded_err, 10 * kSplitBound) << "rounded gate_up within 10x the split bound " << tag;
    EXPECT_GT(out_rounded_err, 10 * kSplitBound) << "rounded down within 10x the split bound " << tag;
  }
}

}  // namespace
}  // namespace tandem::kernels
