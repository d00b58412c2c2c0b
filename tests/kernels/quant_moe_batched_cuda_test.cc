// The quantized decode-batch experts (kernels/moe_batched.h moe_batched_quant, quant_moe_batched.cu)
// against the references of the two products they replace (ref::moe_gate_up_quant then
// ref::moe_down_quant), for FP8 block-scaled and NVFP4 stacks (tests/kernels/quant_stacks.h), with
// the outputs poisoned before each launch: Qwen3-30B-A3B's expert at TP 1 and its TP 4 shard (one
// FP8 scale row per weight row, the down shard starting 64 columns into a block), FP8 scale blocks
// that end inside a 64-wide chunk of k (32 x 32 blocks, shards starting 32 columns into a block),
// K = 9 (a shared expert), a partial last chunk of k (I = 96), crowded experts (several 32-pair
// tiles each) and partial n-tiles. Also which layouts it refuses, and that a second launch gives
// the same bits.
//
// Bound: ||out - ref|| / ||ref|| < 1e-4. The weights enter the mma exactly (an e4m3 value, or an
// e2m1 code times its e4m3 group scale, is a bf16 value); the activations as bf16 hi + lo (~2^-16
// of float32); float32 accumulation over at most 2048 terms, FP8's block scales and NVFP4's row
// scales applied in float32: a few 1e-6 expected, while one wrong code, scale or row moves the
// result by percent. Also times both formats beside their per-token kernels (quant_moe.h) at
// Qwen3-30B-A3B's shape (printed, not asserted: the decode bench decides). Skips without a GPU.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/moe_batched.h"
#include "kernels/quant_moe.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/quant_stacks.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::Fp8Case;
using testing::MedianUs;
using testing::Nvfp4Stack;
using testing::RandomExpertIds;
using testing::RandomFloats;
using testing::RandomFp8;
using testing::Shape;

constexpr double kBound = 1e-4;

struct Routing {
  int64_t T, E, K, H, I;
  bool crowded = false;  // every token picks from the first K + 1 experts: > 32 pairs per expert
};

std::vector<int32_t> Pick(const Routing& r) {
  return RandomExpertIds(r.T, r.crowded ? std::min(r.E, r.K + 1) : r.E, r.K);
}

// Runs moe_batched_quant twice on random inputs and checks both against the references.
void Check(const std::string& tag, const Routing& r, const QuantMatrix& gu_host, const QuantMatrix& gu_dev,
           const QuantMatrix& dn_host, const QuantMatrix& dn_dev) {
  const std::vector<float> x = RandomFloats(r.T * r.H), weights = RandomFloats(r.T * r.K);
  const std::vector<int32_t> ids = Pick(r);
  ASSERT_TRUE(MoeBatchedQuantSupported(gu_dev, dn_dev, r.H, r.I)) << tag;
  const size_t bytes = MoeBatchedScratchBytes(r.T, r.K, r.H, r.I);
  DeviceBuffer<float> d_x(x), d_w(weights), d_out(r.T * r.H), d_act(r.T * r.K * r.I), d_scratch((bytes + 3) / 4);
  DeviceBuffer<int32_t> d_ids(ids);
  std::vector<float> act(r.T * r.K * r.I), want(r.T * r.H);
  ref::moe_gate_up_quant(act.data(), x.data(), ids.data(), gu_host, r.T, r.K);
  ref::moe_down_quant(want.data(), act.data(), ids.data(), weights.data(), dn_host, r.T, r.K);
  d_out.Poison();
  d_act.Poison();
  d_scratch.Poison();
  moe_batched_quant(d_out.get(), d_act.get(), d_x.get(), d_ids.get(), d_w.get(), gu_dev, dn_dev, r.T, r.K, r.H, r.I,
                    d_scratch.get(), nullptr);
  const std::vector<float> got = d_out.Download();
  ExpectClose(tag + " act", d_act.Download(), act, kBound);
  ExpectClose(tag, got, want, kBound);
  d_out.Poison();
  moe_batched_quant(d_out.get(), d_act.get(), d_x.get(), d_ids.get(), d_w.get(), gu_dev, dn_dev, r.T, r.K, r.H, r.I,
                    d_scratch.get(), nullptr);
  EXPECT_EQ(d_out.Download(), got) << tag << ": not deterministic";
}

std::string Tag(const char* format, const Routing& r) {
  return std::string("moe_batched_quant ") + format + " " + Shape({r.T, r.E, r.K, r.H, r.I}) +
         (r.crowded ? " crowded" : "");
}

TEST(quant_moe_batched_cuda, Fp8MatchesReference) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Routing r;
    Fp8Case gate_up, down;  // count / rows / cols filled in below
  };
  const std::vector<Case> cases = {
      {{32, 16, 8, 2048, 768}, {}, {}},                   // Qwen3-30B-A3B's expert, 16 of its 128
      {{10, 128, 8, 512, 256}, {}, {}},                   // the engine's smallest batch, spread thin
      {{13, 64, 9, 1024, 192}, {1, 0, 0, 128, 128, true}, {1, 0, 0, 128, 128, false, 64}},  // TP 4 shard
      {{5, 16, 8, 256, 96}, {1, 0, 0, 64, 64}, {1, 0, 0, 64, 64, true}},  // 64-blocks, a partial chunk
      {{40, 8, 2, 256, 128, true}, {}, {}},               // 3 experts: 32-pair tiles, partial n-tiles
      {{256, 16, 8, 256, 128, true}, {1, 0, 0, 128, 128, true}, {}},
      // Scale blocks that end inside a 64-wide chunk: 32 x 32 blocks (the FP8 fixtures'), a TP 8
      // down shard (96 columns starting 32 into a 128-block), 64-blocks starting 32 columns in.
      {{24, 16, 8, 256, 96}, {1, 0, 0, 32, 32}, {1, 0, 0, 32, 32}},
      {{21, 32, 8, 512, 96}, {1, 0, 0, 128, 128, true}, {1, 0, 0, 128, 128, false, 32}},
      {{12, 8, 4, 128, 160, true}, {1, 0, 0, 64, 64, true, 32}, {1, 0, 0, 64, 64, true, 32}},
  };
  for (Case c : cases) {
    c.gate_up.count = c.down.count = c.r.E;
    c.gate_up.rows = 2 * c.r.I, c.gate_up.cols = c.r.H;
    c.down.rows = c.r.H, c.down.cols = c.r.I;
    const auto gate_up = RandomFp8(c.gate_up);
    const auto down = RandomFp8(c.down);
    Check(Tag("fp8", c.r) + " gate_up " + Describe(c.gate_up) + ", down " + Describe(c.down), c.r, gate_up->host,
          gate_up->device, down->host, down->device);
  }
}

TEST(quant_moe_batched_cuda, Nvfp4MatchesReference) {
  SKIP_WITHOUT_GPU();
  const std::vector<Routing> cases = {
      {32, 16, 8, 2048, 768}, {10, 128, 8, 512, 256}, {13, 64, 9, 1024, 192},
      {40, 8, 2, 128, 64, true}, {256, 16, 8, 256, 128, true},
  };
  for (const Routing& r : cases) {
    Nvfp4Stack gate_up(r.E, 2 * r.I, r.H), down(r.E, r.H, r.I);
    Check(Tag("nvfp4", r), r, gate_up.host, gate_up.device, down.host, down.device);
  }
}

// Layouts the kernel does not take go to the per-token kernels; these must be refused, not run wrong.
TEST(quant_moe_batched_cuda, RefusesLayoutsItCannotTake) {
  SKIP_WITHOUT_GPU();
  auto fp8 = [](int64_t rows, int64_t cols, int64_t block_in, int64_t phase) {
    QuantMatrix q = QuantMatrix::Layout(WeightFormat::kFp8Block, 4, rows, cols, block_in, 128);
    q.col_phase = phase;
    q.data = reinterpret_cast<const void*>(uintptr_t{256});
    return q;
  };
  EXPECT_TRUE(MoeBatchedQuantSupported(fp8(1536, 2048, 128, 0), fp8(2048, 768, 128, 0), 2048, 768));
  EXPECT_TRUE(MoeBatchedQuantSupported(fp8(1536, 2048, 128, 0), fp8(2048, 768, 128, 32), 2048, 768))
      << "a shard starting 32 columns into a block (TP 8's 96-column down shard)";
  EXPECT_TRUE(MoeBatchedQuantSupported(fp8(1536, 2048, 32, 0), fp8(2048, 768, 32, 0), 2048, 768)) << "32-blocks";
  EXPECT_FALSE(MoeBatchedQuantSupported(fp8(1536, 2048, 128, 0), fp8(2048, 768, 128, 16), 2048, 768))
      << "a shard starting 16 columns into a block";
  EXPECT_FALSE(MoeBatchedQuantSupported(fp8(1536, 2048, 16, 0), fp8(2048, 768, 16, 0), 2048, 768)) << "16-blocks";
  EXPECT_FALSE(MoeBatchedQuantSupported(fp8(1536, 2048, 96, 0), fp8(2048, 768, 96, 0), 2048, 768)) << "96-blocks";
  EXPECT_FALSE(MoeBatchedQuantSupported(fp8(1536, 2048, 128, 0), fp8(2048, 768, 128, 0), 2048, 640)) << "wrong I";
  auto nvfp4 = [](int64_t rows, int64_t cols) {
    QuantMatrix q = QuantMatrix::Layout(WeightFormat::kNvfp4, 4, rows, cols);
    q.data = reinterpret_cast<const void*>(uintptr_t{256});
    q.group_scales = reinterpret_cast<const uint8_t*>(uintptr_t{256});
    return q;
  };
  EXPECT_TRUE(MoeBatchedQuantSupported(nvfp4(1536, 2048), nvfp4(2048, 768), 2048, 768));
  EXPECT_FALSE(MoeBatchedQuantSupported(nvfp4(192, 2048), nvfp4(2048, 96), 2048, 96)) << "I % 64 != 0";
  EXPECT_FALSE(MoeBatchedQuantSupported(nvfp4(1536, 2048), fp8(2048, 768, 128, 0), 2048, 768)) << "mixed formats";
}

// One MoE layer of Qwen3-30B-A3B (128 experts, top-8, H 2048, I 768) at decode batches: the per-token
// quantized kernels and moe_batched_quant on the same routing. Prints microseconds and the distinct
// experts' bytes per microsecond.
TEST(quant_moe_batched_cuda, QwenShapeTimed) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t E = 128, K = 8, H = 2048, I = 768;
  Fp8Case gc{E, 2 * I, H}, dc{E, H, I};
  const auto fp8_gu = RandomFp8(gc), fp8_dn = RandomFp8(dc);
  Nvfp4Stack nv_gu(E, 2 * I, H), nv_dn(E, H, I);
  for (const int64_t T : {8, 10, 16, 32, 64}) {
    const Routing r{T, E, K, H, I};
    const std::vector<int32_t> ids = Pick(r);
    std::vector<int32_t> distinct(ids);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    DeviceBuffer<float> d_x(RandomFloats(T * H)), d_w(RandomFloats(T * K)), d_out(T * H), d_act(T * K * I);
    DeviceBuffer<int32_t> d_ids(ids);
    DeviceBuffer<float> d_scratch((MoeBatchedScratchBytes(T, K, H, I) + 3) / 4);
    for (const auto& [name, gu, dn] : {std::tuple{"fp8", fp8_gu->device, fp8_dn->device},
                                       std::tuple{"nvfp4", nv_gu.device, nv_dn.device}}) {
      const double bytes = static_cast<double>(distinct.size()) * (gu.matrix_bytes() + dn.matrix_bytes());
      const double per_token = MedianUs(
          [&] {
            moe_gate_up_quant(d_act.get(), d_x.get(), d_ids.get(), gu, T, K, nullptr);
            moe_down_quant(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), dn, T, K, nullptr, true);
          },
          9);
      const double batched = MedianUs(
          [&] {
            moe_batched_quant(d_out.get(), d_act.get(), d_x.get(), d_ids.get(), d_w.get(), gu, dn, T, K, H, I,
                              d_scratch.get(), nullptr);
          },
          9);
      std::printf("%-5s MoE layer, %3lld tokens (%3zu experts, %.0f MB): per-token %.1f us (%.0f GB/s), batched "
                  "%.1f us (%.0f GB/s)\n",
                  name, static_cast<long long>(T), distinct.size(), bytes / 1e6, per_token, bytes / per_token / 1e3,
                  batched, bytes / batched / 1e3);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
