// The split tensor-core decode attention (kernels/attention_decode.h) against the CPU reference of
// paged attention (ref::paged_attention, double accumulation) over bf16 and fp8 (e4m3, with and
// without per-layer scales) caches: decode steps of one-token sequences at positions that start,
// end and straddle 64-position tiles, over shuffled block tables whose unused slots hold NaN (and
// whose entries past a sequence's blocks name a block far outside the cache), the output poisoned
// before each launch.
//
// Each case runs with max_positions exactly the step's longest context and with a larger bound (a
// graph captured for a wider table: more partitions than tiles, the extra blocks must leave), and
// twice in a row: the partition counters must come back to 0 (the next launch and graph replays
// depend on it), which the second launch's result and a read of the counters both check. The second
// launch asks for the split that fits one attention block an SM (kernels/carveout.h
// kFitDecodeAttention: what a batch-1 step does), the first for the driver's split. One sequence
// takes the cluster merge (kernels/attention_decode.h), 32 sequences the global one.
//
// Bounds as attention_prefill_cuda_test's (the same bf16 operands: Q with the scale folded in, and
// P): ||out - ref|| / ||ref|| < 1e-2 over the output, < 5e-2 for every (token, head) row.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/attention_prefill.h"
#include "kernels/carveout.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::MedianUs;
using testing::RandomBf16;
using testing::RandomFloats;
using testing::Shape;
using testing::attention::Case;
using testing::attention::MakeStep;
using testing::attention::PoisonUnused;
using testing::attention::Reference;
using testing::attention::Seq;
using testing::attention::Step;
using testing::attention::WorstRow;

constexpr double kBound = 1e-2;
constexpr double kRowBound = 5e-2;

// A decode step: one token per sequence at each of `positions`.
Case DecodeCase(int64_t nh, int64_t nkv, int64_t hd, int64_t bs, const std::vector<int32_t>& positions) {
  Case c{nh, nkv, hd, bs, {}};
  for (const int32_t p : positions) c.seqs.push_back(Seq{p, 1});
  return c;
}

TEST(attention_decode_cuda, MatchesPagedAttentionReference) {
  SKIP_WITHOUT_GPU();
  std::vector<int32_t> batch32;
  for (int i = 0; i < 32; ++i) batch32.push_back(static_cast<int32_t>(testing::Rng()() % 4096));
  const std::vector<Case> cases = {
      // Qwen3-30B-A3B's attention (32 q heads, 4 kv heads, head_dim 128): one sequence at 1k and 4k
      // (the last position alone in its tile, and a whole last tile), a batch of 8 at positions that
      // start, end and straddle tiles, a batch of 32 at random positions.
      DecodeCase(32, 4, 128, 16, {1023}),
      DecodeCase(32, 4, 128, 16, {4096}),
      DecodeCase(32, 4, 128, 16, {0, 5, 63, 64, 100, 1000, 2047, 4095}),
      DecodeCase(32, 4, 128, 16, batch32),
      // A group of 8 over 2 kv heads (block size 32), and head_dim 64.
      DecodeCase(16, 2, 128, 32, {0, 31, 32, 700, 3000}),
      DecodeCase(16, 2, 64, 16, {1, 64, 129, 1900}),
      // Groups of 16 (every row of the m16 tile), 1 (one real row) and 4.
      DecodeCase(16, 1, 64, 16, {3, 200, 5000}),
      DecodeCase(8, 8, 128, 16, {9, 640, 1500}),
      DecodeCase(16, 4, 128, 32, {0, 77, 2100}),
      // The tiny test models' attention (head_dim 32, block size 32).
      DecodeCase(8, 4, 32, 32, {0, 32, 33, 150}),
      DecodeCase(8, 2, 32, 32, {7, 64, 500}),
  };
  for (const Case& c : cases) {
    const Step st = MakeStep(c);
    const AttentionShape& A = st.A;
    const int64_t S = st.S, kv_dim = c.nkv * c.hd, num_blocks = st.num_blocks;
    ASSERT_EQ(st.T, S);
    ASSERT_TRUE(attention_decode_supported(A)) << Shape({c.nh, c.nkv, c.hd});
    const int32_t longest = *std::max_element(st.pos.begin(), st.pos.end()) + 1;
    auto q = RandomFloats(S * A.q_stride);
    auto kc = RandomBf16(num_blocks * c.bs * kv_dim), vc = RandomBf16(num_blocks * c.bs * kv_dim);
    auto k8 = testing::RandomE4m3(kc.size()), v8 = testing::RandomE4m3(vc.size());
    for (auto* cache : {&kc, &vc}) PoisonUnused(*cache, st, bf16_bits{0x7fc0});
    for (auto* cache : {&k8, &v8}) PoisonUnused(*cache, st, fp8_e4m3{kE4m3NanBits});
    DeviceBuffer<float> d_q(q), d_out(S * c.nh * c.hd);
    DeviceBuffer<int32_t> d_tables(st.tables), d_pos(st.pos);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    std::string tag = "attention_decode " + Shape({c.nh, c.nkv, c.hd, c.bs, S});

    for (const int64_t max_positions : {static_cast<int64_t>(longest), int64_t{8192}}) {
      for (const int max_buffers : {2, kMaxDecodeBuffers}) {
        const int64_t parts = attention_decode_parts(S, A, max_positions);
        const int buffers = attention_decode_buffers(S, A, max_positions, true, max_buffers);
        EXPECT_EQ(attention_decode_buffers(S, A, max_positions, false, max_buffers), 2) << "fp8 caches keep 2";
        const int64_t n_counters = attention_decode_counter_count(S, A);
        DeviceBuffer<float> d_scratch(std::max<int64_t>(attention_decode_scratch_floats(S, A, max_positions), 1));
        DeviceBuffer<uint32_t> d_counters(n_counters);
        CUDA_CHECK(cudaMemset(d_counters.get(), 0, n_counters * sizeof(uint32_t)));
        const std::string mp = " max_positions " + std::to_string(max_positions) + " (" + std::to_string(parts) +
                               " partitions, bf16 " + std::to_string(buffers) + " buffers of at most " +
                               std::to_string(max_buffers) + ")";
        auto check = [&](const std::string& what, const auto& k_host, const auto& v_host, KvScale kv_scale) {
          using KV = typename std::decay_t<decltype(k_host)>::value_type;
          DeviceBuffer<KV> d_k(k_host), d_v(v_host);
          const std::vector<float> want =
              Reference(q, k_host, v_host, st.tables, st.token_seq, st.pos, A, scale, kv_scale);
          for (int launch = 0; launch < 2; ++launch) {
            const ScopedLaunchCarveout carveout(
                launch == 0 ? LaunchCarveout::kDefault : LaunchCarveout::kFitDecodeAttention,
                attention_decode_buffers(S, A, max_positions, sizeof(KV) == 2, max_buffers));
            d_out.Poison();
            attention_decode(d_out.get(), d_scratch.get(), d_counters.get(), d_q.get(), d_k.get(), d_v.get(),
                             d_tables.get(), d_pos.get(), S, A, max_positions, scale, nullptr, kv_scale, max_buffers);
            const std::vector<float> got = d_out.Download();
            const std::string name = what + mp + (launch == 0 ? "" : ", second launch (fit carveout)");
            ExpectClose(name, got, want, kBound);
            const double worst = WorstRow(got, want, c.hd);
            std::printf("%-60s worst (token, head) row rel err %.3g (bound %.0e)\n", name.c_str(), worst, kRowBound);
            EXPECT_LT(worst, kRowBound) << name;
            const std::vector<uint32_t> counters = d_counters.Download();
            EXPECT_EQ(std::count(counters.begin(), counters.end(), 0u), n_counters) << name << ": counters not reset";
          }
        };
        check(tag + " bf16 kv", kc, vc, {});
        check(tag + " fp8 kv", k8, v8, {});
        check(tag + " fp8 kv scaled", k8, v8, KvScale{0.37f, 2.5f});
      }
    }
  }
}

// Qwen3-30B-A3B's attention at the bench's decode points (batch 1 / 8 / 32 at contexts 1k and 4k,
// bf16 cache): the split kernel against paged_attention and the unsplit tiled kernel
// (attention_prefill, the engine's decode path for batches of 8+ today) on the same inputs, then the
// three timed: median of 9 launches each, with the KV bytes each launch must read. These are the
// kernel-level A/B figures; the engine's A/B is the decode bench's.
TEST(attention_decode_cuda, QwenShapeAgainstOtherKernelsAndTimed) {
  SKIP_WITHOUT_GPU();
  for (const int32_t ctx : {1024, 4096}) {
    for (const int64_t batch : {1, 8, 32}) {
      const Step st = MakeStep(DecodeCase(32, 4, 128, 16, std::vector<int32_t>(batch, ctx)));
      const AttentionShape& A = st.A;
      const int64_t S = st.S, kv_dim = A.n_kv_heads * A.head_dim, num_blocks = st.num_blocks, row = 32 * 128;
      const int64_t max_positions = ctx + 1;
      DeviceBuffer<float> d_q(RandomFloats(S * A.q_stride)), d_out(S * row), d_paged(S * row), d_tiled(S * row);
      DeviceBuffer<float> d_scratch(std::max(attention_scratch_floats(S, A, max_positions),
                                             attention_decode_scratch_floats(S, A, max_positions)));
      DeviceBuffer<bf16_bits> d_k(RandomBf16(num_blocks * A.block_size * kv_dim)),
          d_v(RandomBf16(num_blocks * A.block_size * kv_dim));
      DeviceBuffer<int32_t> d_tables(st.tables), d_seq(st.token_seq), d_pos(st.pos), d_starts(st.seq_starts);
      const int64_t n_counters = std::max(attention_counter_count(S, A), attention_decode_counter_count(S, A));
      DeviceBuffer<uint32_t> d_counters(n_counters);
      CUDA_CHECK(cudaMemset(d_counters.get(), 0, n_counters * sizeof(uint32_t)));
      const float scale = 1.0f / std::sqrt(static_cast<float>(A.head_dim));
      auto split = [&] {
        attention_decode(d_out.get(), d_scratch.get(), d_counters.get(), d_q.get(), d_k.get(), d_v.get(),
                         d_tables.get(), d_pos.get(), S, A, max_positions, scale, nullptr);
      };
      auto paged = [&] {
        paged_attention(d_paged.get(), d_scratch.get(), d_counters.get(), d_q.get(), d_k.get(), d_v.get(),
                        d_tables.get(), d_seq.get(), d_pos.get(), S, A, max_positions, scale, nullptr);
      };
      auto tiled = [&] {
        attention_prefill(d_tiled.get(), d_q.get(), d_k.get(), d_v.get(), d_tables.get(), d_pos.get(), d_starts.get(),
                          S, S, A, scale, nullptr);
      };
      d_out.Poison();
      split();
      paged();
      tiled();
      const std::string tag = "decode " + std::to_string(batch) + " x ctx " + std::to_string(ctx);
      ExpectClose(tag + " split vs paged_attention", d_out.Download(), d_paged.Download(), kBound);
      ExpectClose(tag + " split vs unsplit tiled", d_out.Download(), d_tiled.Download(), kBound);
      const double t_split = MedianUs(split, 9), t_paged = MedianUs(paged, 9), t_tiled = MedianUs(tiled, 9);
      const double mb = 2.0 * batch * max_positions * kv_dim * 2 / 1e6;  // K and V, bf16
      std::printf("%-22s one layer (%.1f MB of KV, %lld partitions): split %.1f us (%.0f GB/s), paged %.1f us, "
                  "unsplit tiled %.1f us\n",
                  tag.c_str(), mb, static_cast<long long>(attention_decode_parts(S, A, max_positions)), t_split,
                  mb * 1e3 / t_split, t_paged, t_tiled);
    }
  }
}

// The carveout scope is per thread and nests: each scope restores the setting it found.
TEST(attention_decode_cuda, CarveoutScopeRestores) {
  EXPECT_EQ(CurrentLaunchCarveout(), LaunchCarveout::kDefault);
  {
    const ScopedLaunchCarveout outer(LaunchCarveout::kFitDecodeAttention);
    EXPECT_EQ(CurrentLaunchCarveout(), LaunchCarveout::kFitDecodeAttention);
    EXPECT_EQ(CurrentDecodeBuffers(), 2);
    {
      const ScopedLaunchCarveout inner(LaunchCarveout::kFitDecodeAttention, kMaxDecodeBuffers);
      EXPECT_EQ(CurrentDecodeBuffers(), kMaxDecodeBuffers);
    }
    EXPECT_EQ(CurrentDecodeBuffers(), 2);
    {
      const ScopedLaunchCarveout inner(LaunchCarveout::kDefault);
      EXPECT_EQ(CurrentLaunchCarveout(), LaunchCarveout::kDefault);
    }
    EXPECT_EQ(CurrentLaunchCarveout(), LaunchCarveout::kFitDecodeAttention);
  }
  EXPECT_EQ(CurrentLaunchCarveout(), LaunchCarveout::kDefault);
  EXPECT_EQ(CurrentDecodeBuffers(), 2);
}

TEST(attention_decode_cuda, SupportedShapesAndPartitions) {
  AttentionShape A{32, 4, 128, 16, 64, 32 * 128 + 2 * 4 * 128};
  EXPECT_TRUE(attention_decode_supported(A));
  AttentionShape hd256 = A;
  hd256.head_dim = 256;
  EXPECT_FALSE(attention_decode_supported(hd256));  // registers: stays on the other kernels
  AttentionShape group32 = A;
  group32.n_heads = 32, group32.n_kv_heads = 1;
  EXPECT_FALSE(attention_decode_supported(group32));  // more rows than one m16 tile
  AttentionShape unaligned = A;
  unaligned.q_stride = 4098;
  EXPECT_FALSE(attention_decode_supported(unaligned));
  AttentionShape uneven = A;
  uneven.n_heads = 30;
  EXPECT_FALSE(attention_decode_supported(uneven));
  if (!testing::NoGpuReason().empty()) GTEST_SKIP() << "partition counts need the device's SM count";
  // Never more partitions than 64-position tiles of max_positions, at least one, and none needed
  // (no scratch) when a sequence fits one partition.
  EXPECT_EQ(attention_decode_parts(1, A, 64), 1);
  EXPECT_EQ(attention_decode_scratch_floats(1, A, 64), 0);
  EXPECT_LE(attention_decode_parts(1, A, 1024), 16);
  EXPECT_GE(attention_decode_parts(1, A, 1024), 2);
  EXPECT_EQ(attention_decode_parts(100000, A, 4096), 1);
  EXPECT_EQ(attention_decode_counter_count(8, A), 32);
  // The buffers: 3 for a bf16 cache with partitions of more than 2 tiles (batch 1 at 4k: 65 tiles
  // over at most 16 partitions) where the device places the cluster; 2 when asked for 2, for short
  // contexts, many sequences and fp8 caches. Where a block may hold the three buffers with room to
  // spare (Hopper's 227 KB), batch 1 at 4k takes them: an A/B of the deep walk cannot silently
  // measure the double-buffered one.
  EXPECT_EQ(attention_decode_buffers(1, A, 4097, true, 2), 2);
  EXPECT_EQ(attention_decode_buffers(1, A, 4097, false, kMaxDecodeBuffers), 2);
  EXPECT_EQ(attention_decode_buffers(1, A, 128, true, kMaxDecodeBuffers), 2);
  EXPECT_EQ(attention_decode_buffers(32, A, 4097, true, kMaxDecodeBuffers), 2);
  const int deep = attention_decode_buffers(1, A, 4097, true, kMaxDecodeBuffers);
  EXPECT_TRUE(deep == 2 || deep == 3) << deep;
  int device = 0, smem_optin = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem_optin >= 200 * 1024) {
    EXPECT_EQ(deep, 3) << "Hopper-sized shared memory holds the deep walk's 3 buffers";
  }
  std::printf("batch 1 at 4k takes %d K/V buffers (block shared memory up to %d bytes)\n", deep, smem_optin);
}

}  // namespace
}  // namespace tandem::kernels
