// The tensor-core prefill attention (kernels/attention_prefill.h) against the CPU reference of paged
// attention (ref::paged_attention, double accumulation) over bf16, float32 and fp8 (e4m3, with and
// without per-layer scales) caches, on fresh random inputs with the output poisoned before each
// launch. Steps hold several sequences, each a chunk of consecutive positions that starts at 0 or
// after cached positions, one-token (decode-style) sequences mixed in, over shuffled block tables.
//
// Bounds: ||out - ref|| / ||ref|| < 1e-2 over the whole output, and < 5e-2 for every (token, head)
// row. The kernel rounds Q (scale folded in), P and a float32 cache's K and V to bf16 operands
// (METHOD.md: bf16 operands give 1e-3..1e-2). A host emulation of the kernel (ldmatrix and mma.sync
// per the PTX fragment layouts) gave 1.5e-3..3e-3 overall; its worst row was 1.6e-2, on the fp8 data
// (codes up to 15: scores with a spread of ~3, so a few dominant weights carry Q's rounding). The row
// bound catches a single wrong row, which the whole-output norm would dilute below 1e-2 in a step of
// 2100 tokens x 32 heads; a wrong row is off by ~100%.
//
// Cache slots past each sequence's last position hold NaN, and block-table entries past a
// sequence's blocks name a block far outside the cache: a tile that reads past the positions it
// may use (its last K/V tile runs to a multiple of 64) turns the output NaN or faults.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "kernels/attention.h"
#include "kernels/attention_prefill.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::MedianUs;
using testing::RandomBf16;
using testing::RandomFloats;
using testing::Rng;
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

TEST(attention_prefill_cuda, MatchesPagedAttentionReference) {
  SKIP_WITHOUT_GPU();
  const std::vector<Case> cases = {
      // Qwen3-30B-A3B's shape: one 2100-token prompt from position 0 (33 tiles of 64 positions).
      {32, 4, 128, 16, {{0, 2100}}},
      // Chunks after cached positions, short prompts, and decode-style one-token sequences.
      {32, 4, 128, 16, {{1000, 200}, {5, 1}, {0, 64}, {300, 1}, {0, 17}, {1500, 90}}},
      {16, 2, 128, 16, {{0, 1}, {0, 300}, {640, 129}, {2047, 1}, {63, 66}}},
      {16, 2, 64, 16, {{0, 1}, {0, 37}, {500, 300}, {1, 1}, {1900, 100}, {64, 64}, {777, 1}, {0, 129}}},
      // Groups of 1 (128 tokens per tile) and 16 (8 tokens per tile), head_dim 32 and 64.
      {8, 8, 32, 16, {{0, 300}, {50, 130}, {9, 1}}},
      {16, 1, 64, 16, {{0, 50}, {200, 23}, {3, 1}}},
      // The tiny test models' shape (block size 32).
      {8, 4, 32, 32, {{0, 33}, {33, 1}, {100, 70}}},
      // head_dim 256 (the hybrid models' full attention: 4 warps, 32-position K/V tiles).
      {16, 2, 256, 16, {{0, 300}, {500, 77}, {9, 1}, {0, 8}}},
  };
  for (const Case& c : cases) {
    const Step st = MakeStep(c);
    const AttentionShape& A = st.A;
    const int64_t T = st.T, S = st.S, kv_dim = c.nkv * c.hd, num_blocks = st.num_blocks;
    const std::vector<int32_t>&tables = st.tables, &token_seq = st.token_seq, &pos = st.pos, &seq_starts = st.seq_starts;
    ASSERT_TRUE(attention_prefill_supported(A));
    auto q = RandomFloats(T * A.q_stride);
    auto kc = RandomBf16(num_blocks * c.bs * kv_dim), vc = RandomBf16(num_blocks * c.bs * kv_dim);
    auto kf = testing::Bf16ToFloats(kc), vf = testing::Bf16ToFloats(vc);
    for (auto& v : vf) v += 1e-3f;  // values bf16 cannot hold: the kernel rounds them
    auto k8 = testing::RandomE4m3(kc.size()), v8 = testing::RandomE4m3(vc.size());
    for (auto* cache : {&kc, &vc}) PoisonUnused(*cache, st, bf16_bits{0x7fc0});
    for (auto* cache : {&kf, &vf}) PoisonUnused(*cache, st, static_cast<float>(NAN));
    for (auto* cache : {&k8, &v8}) PoisonUnused(*cache, st, fp8_e4m3{kE4m3NanBits});

    DeviceBuffer<float> d_q(q), d_out(T * c.nh * c.hd);
    DeviceBuffer<int32_t> d_tables(tables), d_pos(pos), d_starts(seq_starts);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    std::string tag = "attention_prefill " + Shape({c.nh, c.nkv, c.hd, c.bs, T}) + " seqs";
    for (const Seq& s : c.seqs) tag += " " + std::to_string(s.prefix) + "+" + std::to_string(s.chunk);

    auto check = [&](const std::string& what, const auto& k_host, const auto& v_host, KvScale kv_scale) {
      using KV = typename std::decay_t<decltype(k_host)>::value_type;
      DeviceBuffer<KV> d_k(k_host), d_v(v_host);
      d_out.Poison();
      attention_prefill(d_out.get(), d_q.get(), d_k.get(), d_v.get(), d_tables.get(), d_pos.get(), d_starts.get(), T,
                        S, A, scale, nullptr, kv_scale);
      const std::vector<float> got = d_out.Download();
      const std::vector<float> want = Reference(q, k_host, v_host, tables, token_seq, pos, A, scale, kv_scale);
      ExpectClose(what, got, want, kBound);
      const double worst = WorstRow(got, want, c.hd);
      std::printf("%-44s worst (token, head) row rel err %.3g (bound %.0e)\n", what.c_str(), worst, kRowBound);
      EXPECT_LT(worst, kRowBound) << what;
    };
    check(tag + " bf16 kv", kc, vc, {});
    check(tag + " f32 kv", kf, vf, {});
    check(tag + " fp8 kv", k8, v8, {});
    check(tag + " fp8 kv scaled", k8, v8, KvScale{0.37f, 2.5f});
  }
}

// Qwen3-30B-A3B's attention shape (32 q heads, 4 kv heads, head_dim 128, bf16 cache) at the bench's
// prefill cases: the kernel against paged_attention (itself checked against the reference by
// kernels_cuda_test) on the same inputs, then both timed: median of 5 launches each, printed with
// the causal work's TFLOP/s (4 x head_dim x heads per (query, key) pair with key <= query).
TEST(attention_prefill_cuda, QwenShapeAgainstPagedAttentionAndTimed) {
  SKIP_WITHOUT_GPU();
  for (const auto& [seqs, len] : std::vector<std::pair<int64_t, int32_t>>{{1, 512}, {1, 2048}, {8, 1024}}) {
    const Step st = MakeStep({32, 4, 128, 16, std::vector<Seq>(seqs, Seq{0, len})});
    const AttentionShape& A = st.A;
    const int64_t T = st.T, kv_dim = A.n_kv_heads * A.head_dim, num_blocks = st.num_blocks;
    DeviceBuffer<float> d_q(RandomFloats(T * A.q_stride)), d_out(T * A.n_heads * A.head_dim),
        d_want(T * A.n_heads * A.head_dim), d_scratch(attention_scratch_floats(T, A, len));
    DeviceBuffer<bf16_bits> d_k(RandomBf16(num_blocks * A.block_size * kv_dim)),
        d_v(RandomBf16(num_blocks * A.block_size * kv_dim));
    DeviceBuffer<int32_t> d_tables(st.tables), d_seq(st.token_seq), d_pos(st.pos), d_starts(st.seq_starts);
    DeviceBuffer<uint32_t> d_counters(attention_counter_count(T, A));
    CUDA_CHECK(cudaMemset(d_counters.get(), 0, attention_counter_count(T, A) * sizeof(uint32_t)));
    const float scale = 1.0f / std::sqrt(static_cast<float>(A.head_dim));
    auto tiled = [&] {
      attention_prefill(d_out.get(), d_q.get(), d_k.get(), d_v.get(), d_tables.get(), d_pos.get(), d_starts.get(), T,
                        seqs, A, scale, nullptr);
    };
    auto paged = [&] {
      paged_attention(d_want.get(), d_scratch.get(), d_counters.get(), d_q.get(), d_k.get(), d_v.get(), d_tables.get(),
                      d_seq.get(), d_pos.get(), T, A, len, scale, nullptr);
    };
    d_out.Poison();
    tiled();
    paged();
    const std::string tag = "prefill " + std::to_string(seqs) + " x " + std::to_string(len);
    ExpectClose(tag + " tiled vs paged_attention", d_out.Download(), d_want.Download(), kBound);
    const double t_tiled = MedianUs(tiled, 5) / 1e3, t_paged = MedianUs(paged, 5) / 1e3;  // ms
    const double flop = 4.0 * A.head_dim * A.n_heads * seqs * (len * (len + 1) / 2.0);
    std::printf("%-24s one layer: tiled %.3f ms (%.0f TFLOP/s), paged_attention %.3f ms (%.1f TFLOP/s): %.1fx\n",
                tag.c_str(), t_tiled, flop / t_tiled * 1e-9, t_paged, flop / t_paged * 1e-9, t_paged / t_tiled);
  }
}

// A mixed step as the engine runs it (engine/cuda/layers.cc): decodes at long contexts first, then
// prefill chunks. paged_attention takes the first S tokens, attention_prefill with done_below = S
// the rest. First attention_prefill alone: the rows of the sequences wholly below S must keep the
// poison (left alone) and every other row match the reference; then both launches: every row.
TEST(attention_prefill_cuda, MixedStepHeadLeftToPagedAttention) {
  SKIP_WITHOUT_GPU();
  const Case c{32, 4, 128, 16, {{3000, 1}, {40, 1}, {1500, 1}, {0, 100}, {200, 64}}};
  const Step st = MakeStep(c);
  const AttentionShape& A = st.A;
  const int64_t T = st.T, S = st.S, kv_dim = c.nkv * c.hd, row = c.nh * c.hd, decodes = 3;
  auto q = RandomFloats(T * A.q_stride);
  auto kc = RandomBf16(st.num_blocks * c.bs * kv_dim), vc = RandomBf16(st.num_blocks * c.bs * kv_dim);
  for (auto* cache : {&kc, &vc}) PoisonUnused(*cache, st, bf16_bits{0x7fc0});
  DeviceBuffer<float> d_q(q), d_out(T * row), d_scratch(attention_scratch_floats(T, A, 3001));
  DeviceBuffer<bf16_bits> d_k(kc), d_v(vc);
  DeviceBuffer<int32_t> d_tables(st.tables), d_seq(st.token_seq), d_pos(st.pos), d_starts(st.seq_starts);
  DeviceBuffer<uint32_t> d_counters(attention_counter_count(T, A));
  CUDA_CHECK(cudaMemset(d_counters.get(), 0, attention_counter_count(T, A) * sizeof(uint32_t)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  const std::vector<float> want = Reference(q, kc, vc, st.tables, st.token_seq, st.pos, A, scale, {});
  auto tiled = [&] {
    attention_prefill(d_out.get(), d_q.get(), d_k.get(), d_v.get(), d_tables.get(), d_pos.get(), d_starts.get(), T, S,
                      A, scale, nullptr, {}, /*done_below=*/S);
  };

  d_out.Poison();
  tiled();
  std::vector<float> got = d_out.Download();
  for (int64_t i = 0; i < decodes * row; ++i) {
    ASSERT_TRUE(std::isnan(got[i])) << "row of a decode below done_below written, value " << i;
  }
  const std::vector<float> rest_got(got.begin() + decodes * row, got.end()),
      rest_want(want.begin() + decodes * row, want.end());
  ExpectClose("mixed step: the tiled kernel's rows", rest_got, rest_want, kBound);

  d_out.Poison();
  paged_attention(d_out.get(), d_scratch.get(), d_counters.get(), d_q.get(), d_k.get(), d_v.get(), d_tables.get(),
                  d_seq.get(), d_pos.get(), /*T=*/S, A, 3001, scale, nullptr);
  tiled();
  got = d_out.Download();
  ExpectClose("mixed step: paged head + tiled rest", got, want, kBound);
  EXPECT_LT(WorstRow(got, want, c.hd), kRowBound);
}

// Unsupported shapes are refused (the engine then takes paged_attention).
TEST(attention_prefill_cuda, SupportedShapes) {
  AttentionShape A;
  A.n_heads = 32, A.n_kv_heads = 4, A.head_dim = 128, A.block_size = 16, A.q_stride = 32 * 128 + 2 * 4 * 128;
  EXPECT_TRUE(attention_prefill_supported(A));
  AttentionShape wide = A;
  wide.head_dim = 512;  // its output alone would take more than a thread's registers
  EXPECT_FALSE(attention_prefill_supported(wide));
  AttentionShape group128 = A;
  group128.n_heads = 128, group128.n_kv_heads = 1;  // one token's rows fill a head_dim 128 block...
  EXPECT_TRUE(attention_prefill_supported(group128));
  group128.head_dim = 256;  // ...but not the 64 rows of a head_dim 256 block
  EXPECT_FALSE(attention_prefill_supported(group128));
  AttentionShape odd_group = A;
  odd_group.n_heads = 12, odd_group.n_kv_heads = 4;  // a group of 3 does not divide the 128 rows
  EXPECT_FALSE(attention_prefill_supported(odd_group));
  AttentionShape unaligned = A;
  unaligned.q_stride = A.q_stride + 2;
  EXPECT_FALSE(attention_prefill_supported(unaligned));
}

}  // namespace
}  // namespace tandem::kernels
