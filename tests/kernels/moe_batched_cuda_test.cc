// The decode-batch experts, kernels/moe_batched.h, against the references of the two products it
// replaces (ref::moe_gate_up then ref::moe_down), on random inputs with the output poisoned before
// each launch. Bound as kernels_cuda_test (1e-3 relative): the activations enter the products as
// bf16 hi + lo pairs, so the products see the float32 activations to ~2^-16. Also times it beside
// the per-token kernels (kernels/moe.h) at Qwen3-30B-A3B's shape (printed, not asserted: the decode
// bench decides). Skips where no GPU is present.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "kernels/moe.h"
#include "kernels/moe_batched.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::MedianUs;
using testing::RandomBf16;
using testing::RandomFloats;
using testing::Rng;

struct Case {
  int64_t T, E, K, H, I;
  bool crowded;  // every token picks from the first K + 1 experts: > 32 pairs per expert (several tiles)
};

std::vector<int32_t> PickExperts(const Case& c) {
  std::vector<int32_t> ids(c.T * c.K);
  const int64_t pool = c.crowded ? std::min(c.E, c.K + 1) : c.E;
  for (int64_t t = 0; t < c.T; ++t) {  // K distinct experts per token, like the router gives
    std::vector<int32_t> perm(pool);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    std::copy(perm.begin(), perm.begin() + c.K, ids.begin() + t * c.K);
  }
  return ids;
}

TEST(moe_batched_cuda, MatchesReference) {
  SKIP_WITHOUT_GPU();
  const std::vector<Case> cases = {
      {2, 16, 4, 128, 64, false},     {8, 128, 8, 2048, 768, false}, {32, 64, 8, 2048, 768, false},
      {32, 65, 9, 2048, 384, false},  // 9 experts per token (a shared one), TP 2's slice
      {40, 8, 2, 96, 96, true},        // 40 tokens on 3 experts: tiles of 32 and partial n-tiles; k tails
      {5, 64, 8, 2048, 96, false},     // TP 8's slice of 768
      {256, 128, 8, 256, 128, true},
  };
  for (const Case& c : cases) {
    auto x = RandomFloats(c.T * c.H);
    auto gate_up = RandomBf16(c.E * 2 * c.I * c.H, 0.05f), down = RandomBf16(c.E * c.H * c.I, 0.05f);
    const std::vector<int32_t> ids = PickExperts(c);
    const std::vector<float> weights = RandomFloats(c.T * c.K);
    ASSERT_TRUE(MoeBatchedSupported(c.H, c.I));
    const size_t bytes = MoeBatchedScratchBytes(c.T, c.K, c.H, c.I);
    DeviceBuffer<float> d_x(x), d_w(weights), d_out(c.T * c.H), d_act(c.T * c.K * c.I), d_scratch((bytes + 3) / 4);
    DeviceBuffer<bf16_bits> d_gu(gate_up), d_down(down);
    DeviceBuffer<int32_t> d_ids(ids);
    std::vector<float> act(c.T * c.K * c.I), want(c.T * c.H);
    ref::moe_gate_up(act.data(), x.data(), ids.data(), gate_up.data(), c.T, c.K, c.H, c.I);
    ref::moe_down(want.data(), act.data(), ids.data(), weights.data(), down.data(), c.T, c.K, c.H, c.I);
    const std::string tag = "moe_batched T=" + std::to_string(c.T) + " E=" + std::to_string(c.E) +
                            " K=" + std::to_string(c.K) + " H=" + std::to_string(c.H) + " I=" + std::to_string(c.I);
    d_out.Poison();
    d_scratch.Poison();
    moe_batched(d_out.get(), d_act.get(), d_x.get(), d_ids.get(), d_w.get(), d_gu.get(), d_down.get(), c.T, c.K, c.H, c.I,
                c.E, d_scratch.get(), nullptr);
    const std::vector<float> got = d_out.Download();
    ExpectClose(tag + " act", d_act.Download(), act, 1e-3);
    ExpectClose(tag, got, want, 1e-3);
    // A second launch gives the same bits: the sums run in a fixed order.
    d_out.Poison();
    moe_batched(d_out.get(), d_act.get(), d_x.get(), d_ids.get(), d_w.get(), d_gu.get(), d_down.get(), c.T, c.K, c.H, c.I,
                c.E, d_scratch.get(), nullptr);
    EXPECT_EQ(d_out.Download(), got) << tag << ": not deterministic";

  }
}

// One MoE layer of Qwen3-30B-A3B (128 experts, top-8, H 2048, I 768: 1.2 GB of bf16 experts, far
// past L2) at decode batches: the per-token kernels and moe_batched on the same routing. Prints
// microseconds and the distinct experts' bytes per microsecond (H200, session 20: per-token 145 /
// 275 / 404 / 525 / 1041 us at 8 / 16 / 24 / 32 / 64 tokens, moe_batched 161 / 228 / 270 / 287 /
// 335 us, 3.1-3.6 TB/s).
TEST(moe_batched_cuda, QwenShapeTimed) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t E = 128, K = 8, H = 2048, I = 768;
  auto gate_up = RandomBf16(E * 2 * I * H, 0.02f), down = RandomBf16(E * H * I, 0.02f);
  DeviceBuffer<bf16_bits> d_gu(gate_up), d_down(down);
  for (const int64_t T : {1, 4, 8, 12, 16, 24, 32, 64}) {
    const Case c{T, E, K, H, I, false};
    const std::vector<int32_t> ids = PickExperts(c);
    std::vector<int32_t> distinct(ids);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    const double bytes = static_cast<double>(distinct.size()) * 3 * I * H * 2;
    DeviceBuffer<float> d_x(RandomFloats(T * H)), d_w(RandomFloats(T * K)), d_out(T * H), d_act(T * K * I);
    DeviceBuffer<int32_t> d_ids(ids);
    DeviceBuffer<float> d_bscratch((MoeBatchedScratchBytes(T, K, H, I) + 3) / 4);
    const double per_token = MedianUs(
        [&] {
          moe_gate_up(d_act.get(), d_x.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr, /*gemm_min_tokens=*/1 << 30);
          moe_down(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), d_down.get(), T, K, H, I, nullptr, true, 1 << 30);
        },
        9);
    const double batched = MedianUs(
        [&] {
          moe_batched(d_out.get(), d_act.get(), d_x.get(), d_ids.get(), d_w.get(), d_gu.get(), d_down.get(), T, K, H,
                      I, E, d_bscratch.get(), nullptr);
        },
        9);
    std::printf("MoE layer, %3lld tokens (%3zu experts, %.0f MB): per-token %.1f us (%.0f GB/s), moe_batched %.1f us "
                "(%.0f GB/s)\n",
                static_cast<long long>(T), distinct.size(), bytes / 1e6, per_token, bytes / per_token / 1e3, batched,
                bytes / batched / 1e3);
  }
}

}  // namespace
}  // namespace tandem::kernels
