// Every CUDA kernel against its CPU reference (kernels/<op>_ref.cc) on fresh random inputs, with
// the outputs poisoned before each launch, at the tiny test model's shapes and at Qwen3-30B-A3B's.
// Bound: ||out - ref|| / ||ref|| < 1e-3 (float32 arithmetic over the same bf16 operands; METHOD.md).
// Skips (with the reason) where no GPU is present.
#include <algorithm>
#include <numeric>

#include "kernels/argmax.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/norm_matmul.h"
#include "kernels/qk_norm_rope.h"
#include "kernels/rmsnorm.h"
#include "kernels/router_topk.h"
#include "kernels/sample.h"
#include "kernels/silu_mul.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomBf16;
using testing::RandomFloats;
using testing::Rng;
using testing::SplitOrdered;

constexpr double kBound = 1e-3;

std::string Shape(std::initializer_list<int64_t> dims) {
  std::string s = "(";
  for (int64_t d : dims) s += std::to_string(d) + ",";
  s.back() = ')';
  return s;
}

TEST(kernels_cuda, Embedding) {
  SKIP_WITHOUT_GPU();
  for (auto [V, H, T] : std::vector<std::array<int64_t, 3>>{{4096, 128, 7}, {151936, 2048, 33}}) {
    auto table = RandomBf16(V * H);
    std::vector<int32_t> ids(T);
    for (auto& i : ids) i = static_cast<int32_t>(Rng()() % V);
    DeviceBuffer<bf16_bits> d_table(table);
    DeviceBuffer<int32_t> d_ids(ids);
    DeviceBuffer<float> d_out(T * H);
    d_out.Poison();
    embedding(d_out.get(), d_ids.get(), d_table.get(), T, H, nullptr);
    std::vector<float> want(T * H);
    ref::embedding(want.data(), ids.data(), table.data(), T, H);
    ExpectClose("embedding " + Shape({V, H, T}), d_out.Download(), want, kBound);
  }
}

TEST(kernels_cuda, AddRmsnorm) {
  SKIP_WITHOUT_GPU();
  // Rows of up to 4096 floats in registers (the norm weights loaded before the wait), 5000 the
  // strided loop; w_offset 1 the hybrids' zero-centred norms.
  for (auto [rows, n] : std::vector<std::array<int64_t, 2>>{{5, 128}, {32, 2048}, {1, 4096}, {2, 5000}}) {
    for (bool with_delta : {true, false}) {
      const float w_offset = with_delta ? 0.0f : 1.0f;
      auto x = RandomFloats(rows * n), delta = RandomFloats(rows * n);
      auto w = RandomBf16(n);
      DeviceBuffer<float> d_x(x), d_delta(delta), d_out(rows * n);
      DeviceBuffer<bf16_bits> d_w(w);
      d_out.Poison();
      add_rmsnorm(d_out.get(), d_x.get(), with_delta ? d_delta.get() : nullptr, d_w.get(), rows, n, 1e-6f, nullptr,
                  w_offset);
      std::vector<float> want(rows * n);
      ref::add_rmsnorm(want.data(), x.data(), with_delta ? delta.data() : nullptr, w.data(), rows, n, 1e-6f,
                       w_offset);
      const std::string tag = std::string(with_delta ? "add_rmsnorm " : "rmsnorm (1 + w) ") + Shape({rows, n});
      ExpectClose(tag + " out", d_out.Download(), want, kBound);
      ExpectClose(tag + " residual", d_x.Download(), x, kBound);
    }
  }
}

TEST(kernels_cuda, QkNormRopeStoreKv) {
  SKIP_WITHOUT_GPU();
  struct Case { QkvLayout L; int64_t T; float theta; };
  for (const Case& c : {Case{{8, 4, 32, 32}, 9, 1e6f}, Case{{32, 4, 128, 128}, 17, 1e6f}, Case{{4, 2, 64, 32}, 3, 1e4f}}) {
    const QkvLayout& L = c.L;
    const int64_t slots = 64, T = c.T;
    auto qkv = RandomFloats(T * L.row());
    const std::vector<float> qkv_in = qkv;
    auto qn = RandomBf16(L.head_dim), kn = RandomBf16(L.head_dim);
    std::vector<float> inv_freq(L.rotary_dim / 2);
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = 1.0f / std::pow(c.theta, 2.0f * i / L.rotary_dim);
    std::vector<int32_t> pos(T), slot(T);
    std::vector<int32_t> perm(slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(Rng()() % 5000), slot[t] = perm[t];
    DeviceBuffer<float> d_qkv(qkv), d_inv(inv_freq);
    DeviceBuffer<bf16_bits> d_qn(qn), d_kn(kn), d_kc(slots * L.kv_dim()), d_vc(slots * L.kv_dim());
    DeviceBuffer<int32_t> d_pos(pos), d_slot(slot);
    d_kc.Poison();
    d_vc.Poison();
    qk_norm_rope_store_kv(d_qkv.get(), d_kc.get(), d_vc.get(), d_qn.get(), d_kn.get(), d_inv.get(), d_pos.get(),
                          d_slot.get(), T, L, 1e-6f, nullptr);
    std::vector<bf16_bits> kc(slots * L.kv_dim(), 0xFFFF), vc(slots * L.kv_dim(), 0xFFFF);
    ref::qk_norm_rope_store_kv(qkv.data(), kc.data(), vc.data(), qn.data(), kn.data(), inv_freq.data(), pos.data(),
                               slot.data(), T, L, 1e-6f);
    const std::string tag = "qk_norm_rope " + Shape({L.n_heads, L.n_kv_heads, L.head_dim, L.rotary_dim, T});
    ExpectClose(tag + " qkv", d_qkv.Download(), qkv, kBound);
    // Only the written slots are compared (the rest stay poisoned on both sides).
    auto got_k = d_kc.Download(), got_v = d_vc.Download();
    std::vector<float> gk, wk, gv, wv;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < L.kv_dim(); ++i) {
        const int64_t o = slot[t] * L.kv_dim() + i;
        gk.push_back(Bf16ToFloat(got_k[o])), wk.push_back(Bf16ToFloat(kc[o]));
        gv.push_back(Bf16ToFloat(got_v[o])), wv.push_back(Bf16ToFloat(vc[o]));
      }
    }
    ExpectClose(tag + " k cache", gk, wk, 1e-2);  // bf16 rounding of values 1 ulp apart
    ExpectClose(tag + " v cache", gv, wv, kBound);
    // Float32 cache: k and v stored exactly.
    DeviceBuffer<float> d_qkv2(qkv_in), d_kf(slots * L.kv_dim()), d_vf(slots * L.kv_dim());
    d_kf.Poison();
    d_vf.Poison();
    qk_norm_rope_store_kv(d_qkv2.get(), d_kf.get(), d_vf.get(), d_qn.get(), d_kn.get(), d_inv.get(), d_pos.get(),
                          d_slot.get(), T, L, 1e-6f, nullptr);
    std::vector<float> qkv_ref = qkv_in, kf(slots * L.kv_dim()), vf(slots * L.kv_dim());
    ref::qk_norm_rope_store_kv(qkv_ref.data(), kf.data(), vf.data(), qn.data(), kn.data(), inv_freq.data(), pos.data(),
                               slot.data(), T, L, 1e-6f);
    auto gkf = d_kf.Download(), gvf = d_vf.Download();
    std::vector<float> a, b, c2, d2;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < L.kv_dim(); ++i) {
        const int64_t o = slot[t] * L.kv_dim() + i;
        a.push_back(gkf[o]), b.push_back(kf[o]), c2.push_back(gvf[o]), d2.push_back(vf[o]);
      }
    }
    ExpectClose(tag + " f32 k cache", a, b, kBound);
    ExpectClose(tag + " f32 v cache", c2, d2, kBound);
  }
}

TEST(kernels_cuda, MatmulBf16) {
  SKIP_WITHOUT_GPU();
  for (auto [T, in, out] : std::vector<std::array<int64_t, 3>>{
           {1, 2048, 4608}, {1, 256, 37}, {3, 128, 384}, {8, 4096, 2048}, {13, 2048, 128}, {37, 768, 2048},
           {1, 2048, 151936}, {1, 4096, 2048}, {1, 768, 2050}, {1, 6144, 129}, {1, 64, 40}, {2, 4096, 33}}) {
    auto x = RandomFloats(T * in);
    auto w = RandomBf16(out * in, 0.05f);
    DeviceBuffer<float> d_x(x), d_y(T * out);
    DeviceBuffer<bf16_bits> d_w(w);
    d_y.Poison();
    matmul_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr);
    std::vector<float> want(T * out);
    ref::matmul_bf16(want.data(), x.data(), w.data(), T, in, out);
    ExpectClose("matmul_bf16 " + Shape({T, in, out}), d_y.Download(), want, kBound);
  }
}

// The fused residual add + RMSNorm + product: y, the new residual and the normed rows, with and
// without a delta, at batch 1 (decode), 3, 8 and 13 (two token tiles), tiny and Qwen3-30B-A3B widths.
TEST(kernels_cuda, AddRmsnormMatmul) {
  SKIP_WITHOUT_GPU();
  for (auto [T, in, out] : std::vector<std::array<int64_t, 3>>{
           {1, 2048, 5120}, {1, 2048, 128}, {3, 128, 384}, {8, 2048, 130}, {13, 512, 200}, {1, 4096, 77}}) {
    for (bool with_delta : {true, false}) {
      auto x = RandomFloats(T * in), delta = RandomFloats(T * in);
      auto nw = RandomBf16(in);
      auto w = RandomBf16(out * in, 0.05f);
      DeviceBuffer<float> d_x(x), d_delta(delta), d_y(T * out), d_xo(T * in), d_xn(T * in), d_xs(in);
      DeviceBuffer<bf16_bits> d_nw(nw), d_w(w);
      d_y.Poison(), d_xo.Poison(), d_xn.Poison(), d_xs.Poison();
      // One token also stores xn in split order (the NVFP4 experts' input).
      add_rmsnorm_matmul(d_y.get(), d_xo.get(), d_xn.get(), d_x.get(), with_delta ? d_delta.get() : nullptr,
                         d_nw.get(), d_w.get(), T, in, out, 1e-6f, nullptr, 0.0f, T == 1 ? d_xs.get() : nullptr);
      std::vector<float> y(T * out), xo(T * in), xn(T * in);
      ref::add_rmsnorm_matmul(y.data(), xo.data(), xn.data(), x.data(), with_delta ? delta.data() : nullptr,
                              nw.data(), w.data(), T, in, out, 1e-6f);
      const std::string tag = std::string(with_delta ? "add_rmsnorm_matmul " : "rmsnorm_matmul ") + Shape({T, in, out});
      ExpectClose(tag + " y", d_y.Download(), y, kBound);
      ExpectClose(tag + " residual", d_xo.Download(), xo, kBound);
      ExpectClose(tag + " normed", d_xn.Download(), xn, kBound);
      if (T == 1) {
        // The same values as the row-order xn the kernel stored, each where the split order puts it.
        const std::vector<float> row = d_xn.Download();
        EXPECT_EQ(d_xs.Download(), SplitOrdered(row.data(), in)) << tag << " normed, split order";
      }
    }
  }
}

TEST(kernels_cuda, RouterTopk) {
  SKIP_WITHOUT_GPU();
  for (auto [T, E, K] : std::vector<std::array<int64_t, 3>>{{7, 16, 4}, {33, 128, 8}, {5, 100, 3}, {9, 512, 10}, {3, 300, 8}}) {
    for (bool renorm : {true, false}) {
      // shared: one more logit per row (the shared expert's gate) and one more output per token.
      for (bool shared : {false, true}) {
        const int64_t LS = E + shared, KS = K + shared;
        auto logits = RandomFloats(T * LS, 2.0f);
        DeviceBuffer<float> d_logits(logits), d_w(T * KS);
        DeviceBuffer<int32_t> d_ids(T * KS);
        d_w.Poison();
        d_ids.Poison();
        router_topk(d_ids.get(), d_w.get(), d_logits.get(), T, E, K, renorm, nullptr, shared);
        std::vector<int32_t> ids(T * KS);
        std::vector<float> w(T * KS);
        ref::router_topk(ids.data(), w.data(), logits.data(), T, E, K, renorm, shared);
        const std::string tag =
            "router_topk " + Shape({T, E, K}) + (renorm ? " renorm" : "") + (shared ? " +shared" : "");
        EXPECT_EQ(d_ids.Download(), ids) << tag;
        ExpectClose(tag + " weights", d_w.Download(), w, kBound);
      }
    }
  }
}

TEST(kernels_cuda, MoeExperts) {
  SKIP_WITHOUT_GPU();
  for (auto [T, E, K, H, I] : std::vector<std::array<int64_t, 5>>{{7, 16, 4, 128, 64}, {1, 128, 8, 2048, 768},
                                                                 {9, 128, 8, 2048, 768}}) {
    auto x = RandomFloats(T * H);
    auto gate_up = RandomBf16(E * 2 * I * H, 0.05f), down = RandomBf16(E * H * I, 0.05f);
    std::vector<int32_t> ids(T * K);
    std::vector<float> weights = RandomFloats(T * K);
    for (int64_t t = 0; t < T; ++t) {  // K distinct experts per token, like the router gives
      std::vector<int32_t> perm(E);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), Rng());
      std::copy(perm.begin(), perm.begin() + K, ids.begin() + t * K);
    }
    DeviceBuffer<float> d_x(x), d_w(weights), d_act(T * K * I), d_out(T * H);
    DeviceBuffer<bf16_bits> d_gu(gate_up), d_down(down);
    DeviceBuffer<int32_t> d_ids(ids);
    d_act.Poison();
    d_out.Poison();
    moe_gate_up(d_act.get(), d_x.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr);
    std::vector<float> act(T * K * I), out(T * H);
    ref::moe_gate_up(act.data(), x.data(), ids.data(), gate_up.data(), T, K, H, I);
    const std::string tag = Shape({T, E, K, H, I});
    ExpectClose("moe_gate_up " + tag, d_act.Download(), act, kBound);
    // moe_down from the reference activations, so each kernel is checked on its own.
    d_act.Upload(act);
    moe_down(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), d_down.get(), T, K, H, I, nullptr);
    ref::moe_down(out.data(), act.data(), ids.data(), weights.data(), down.data(), T, K, H, I);
    ExpectClose("moe_down " + tag, d_out.Download(), out, kBound);
    // Right after moe_gate_up (the engine's order): weights loaded before the wait, same result;
    // that moe_gate_up asks the L2 for another weight (the down stack) as a one-token step does.
    d_act.Poison();
    moe_gate_up(d_act.get(), d_x.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr, kGemmMinTokens,
                L2Prefetch{d_down.get(), E * H * I * 2});
    ExpectClose("moe_gate_up with an L2 prefetch " + tag, d_act.Download(), act, kBound);
    d_out.Poison();
    moe_down(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), d_down.get(), T, K, H, I, nullptr, true);
    ExpectClose("moe_down after moe_gate_up " + tag, d_out.Download(), out, kBound);
  }
}

TEST(kernels_cuda, SiluMul) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 5, n = 768;
  auto gu = RandomFloats(rows * 2 * n, 3.0f);
  DeviceBuffer<float> d_gu(gu), d_out(rows * n);
  d_out.Poison();
  silu_mul(d_out.get(), d_gu.get(), rows, n, nullptr);
  std::vector<float> want(rows * n);
  ref::silu_mul(want.data(), gu.data(), rows, n);
  ExpectClose("silu_mul " + Shape({rows, n}), d_out.Download(), want, kBound);
}

// Decode (one token per sequence at the end of its context) and prefill (a causal chunk of each
// sequence), over shuffled block tables. Sequence s has ctx - s * step positions, and `wide` (when
// set) is the max_positions bound, as for a graph captured for a wider table: the partitions past a
// short context are then empty. Each case runs twice on the same counters (the first must leave
// them 0; the merge's summation order is fixed, so both give the same bits). Over bf16, float32 and
// fp8 (e4m3, with and without per-layer scales) caches.
TEST(kernels_cuda, PagedAttention) {
  SKIP_WITHOUT_GPU();
  struct Case { const char* kind; int64_t nh, nkv, hd, bs, seqs, ctx, chunk, step = 0, wide = 0; };
  for (const Case& c : {Case{"decode", 8, 4, 32, 16, 3, 40, 1}, Case{"decode", 32, 4, 128, 16, 4, 1000, 1},
                        Case{"decode", 32, 4, 128, 16, 1, 4100, 1}, Case{"prefill", 8, 4, 32, 16, 2, 33, 33},
                        Case{"prefill", 32, 4, 128, 16, 2, 300, 200}, Case{"decode", 16, 16, 64, 32, 2, 77, 1},
                        Case{"decode", 8, 4, 32, 16, 1, 20, 1, 0, 4096},
                        Case{"decode", 32, 4, 128, 16, 3, 2000, 1, 990, 2048},
                        Case{"prefill", 4, 2, 64, 16, 1, 300, 8, 0, 1024},
                        Case{"decode", 16, 2, 256, 16, 2, 600, 1, 0, 2048}}) {
    const int64_t wide = std::max(c.wide, c.ctx);
    AttentionShape A;
    A.n_heads = c.nh, A.n_kv_heads = c.nkv, A.head_dim = c.hd, A.block_size = c.bs;
    A.max_blocks = (wide + c.bs - 1) / c.bs;
    A.q_stride = c.nh * c.hd + 2 * c.nkv * c.hd;  // q rows inside the fused qkv buffer
    const int64_t num_blocks = c.seqs * A.max_blocks + 3, kv_dim = c.nkv * c.hd;
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    std::vector<int32_t> tables(perm.begin(), perm.begin() + c.seqs * A.max_blocks);
    std::vector<int32_t> token_seq, pos;
    for (int64_t s = 0; s < c.seqs; ++s) {
      const int64_t ctx = c.ctx - s * c.step;
      for (int64_t i = 0; i < c.chunk; ++i) {
        token_seq.push_back(static_cast<int32_t>(s));
        pos.push_back(static_cast<int32_t>(ctx - c.chunk + i));
      }
    }
    const int64_t T = static_cast<int64_t>(pos.size()), n_counters = attention_counter_count(T, A);
    auto q = RandomFloats(T * A.q_stride);
    auto kc = RandomBf16(num_blocks * c.bs * kv_dim), vc = RandomBf16(num_blocks * c.bs * kv_dim);
    DeviceBuffer<float> d_q(q), d_out(T * c.nh * c.hd), d_scratch(attention_scratch_floats(T, A, wide));
    DeviceBuffer<uint32_t> d_counters(n_counters);
    CUDA_CHECK(cudaMemset(d_counters.get(), 0, n_counters * sizeof(uint32_t)));
    DeviceBuffer<bf16_bits> d_kc(kc), d_vc(vc);
    DeviceBuffer<int32_t> d_tables(tables), d_seq(token_seq), d_pos(pos);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    const std::string tag = std::string("paged_attention ") + c.kind + " " +
                            Shape({c.nh, c.nkv, c.hd, c.bs, c.seqs, c.ctx, c.chunk, c.step, wide});
    auto check = [&](const std::string& what, const auto* d_k, const auto* d_v, const std::vector<float>& want,
                     KvScale kv_scale = {}) {
      std::vector<float> first;
      // Twice: the counters the first launch left behind must serve the next (as on graph replays).
      for (int run = 0; run < 2; ++run) {
        d_out.Poison();
        d_scratch.Poison();
        // Decode cases (one token per sequence) take the launch that loads earlier positions before
        // its wait, as the engine's decode steps do.
        paged_attention(d_out.get(), d_scratch.get(), d_counters.get(), d_q.get(), d_k, d_v, d_tables.get(),
                        d_seq.get(), d_pos.get(), T, A, wide, scale, nullptr, kv_scale,
                        /*one_token_per_sequence=*/c.chunk == 1);
        const std::vector<float> got = d_out.Download();
        const std::string name = what + (run == 0 ? "" : " again");
        ExpectClose(name, got, want, kBound);
        if (run == 0) {
          first = got;
        } else {
          EXPECT_TRUE(got == first) << name << ": not the bits of the first launch";
        }
      }
      EXPECT_EQ(d_counters.Download(), std::vector<uint32_t>(n_counters, 0u)) << what << ": counters not left at 0";
      return first;
    };
    std::vector<float> want(T * c.nh * c.hd);
    ref::paged_attention(want.data(), q.data(), kc.data(), vc.data(), tables.data(), token_seq.data(), pos.data(), T,
                         A, scale);
    check(tag, d_kc.get(), d_vc.get(), want);
    // The same over a float32 cache (the engine's default KV dtype).
    auto kf = testing::Bf16ToFloats(kc), vf = testing::Bf16ToFloats(vc);
    for (auto& v : vf) v += 1e-3f;  // values bf16 cannot hold
    DeviceBuffer<float> d_kf(kf), d_vf(vf);
    ref::paged_attention(want.data(), q.data(), kf.data(), vf.data(), tables.data(), token_seq.data(), pos.data(), T,
                         A, scale);
    check(tag + " f32 kv", d_kf.get(), d_vf.get(), want);
    // The same over an fp8 (e4m3) cache, with scales of 1 and with per-layer scales; the scaled
    // run also equals a float32 cache holding the decoded, scaled values.
    auto k8 = testing::RandomE4m3(kc.size()), v8 = testing::RandomE4m3(vc.size());
    DeviceBuffer<fp8_e4m3> d_k8(k8), d_v8(v8);
    for (const KvScale s : {KvScale{}, KvScale{0.37f, 2.5f}}) {
      ref::paged_attention(want.data(), q.data(), k8.data(), v8.data(), tables.data(), token_seq.data(), pos.data(), T,
                           A, scale, s);
      const auto got = check(tag + (s.k == 1.0f ? " fp8 kv" : " fp8 kv scaled"), d_k8.get(), d_v8.get(), want, s);
      auto k8f = testing::E4m3ToFloats(k8, s.k), v8f = testing::E4m3ToFloats(v8, s.v);
      ref::paged_attention(want.data(), q.data(), k8f.data(), v8f.data(), tables.data(), token_seq.data(), pos.data(),
                           T, A, scale);
      ExpectClose(tag + " fp8 kv vs f32 of its values", got, want, kBound);
    }
  }
}

TEST(kernels_cuda, Argmax) {
  SKIP_WITHOUT_GPU();
  for (auto [R, V] : std::vector<std::array<int64_t, 2>>{{3, 4096}, {8, 151936}}) {
    auto x = RandomFloats(R * V);
    x[V + 17] = x[V + 4000] = 100.0f;  // a tie in row 1: the lower index wins
    DeviceBuffer<float> d_x(x);
    DeviceBuffer<int32_t> d_out(R);
    d_out.Poison();
    argmax(d_out.get(), d_x.get(), R, V, nullptr);
    std::vector<int32_t> want(R);
    ref::argmax(want.data(), x.data(), R, V);
    auto got = d_out.Download();
    std::printf("argmax (%lld, %lld): got %d %d %d, ref %d %d %d\n", static_cast<long long>(R),
                static_cast<long long>(V), got[0], got[1], got[2], want[0], want[1], want[2]);
    EXPECT_EQ(got, want);
    EXPECT_EQ(got[1], 17);
  }
}

// Sampling (kernels/sample.h) against the reference. The two sum probabilities in different orders
// (float tree vs double), so where u lands within kSampleTol (relative) of a CDF step, or top_p
// within kSampleTol of a nucleus boundary, the kernel may pick a neighbouring token: such a row
// ("ambiguous") must still be consistent with the reference's intervals widened by kSampleTol;
// every other row must match exactly. The row's threshold and intervals are recomputed here in
// double from the definitions in sample.h.
constexpr double kSampleTol = 1e-5;

struct SampleRowView {
  std::vector<uint32_t> key;
  std::vector<double> e;
  std::vector<std::pair<uint32_t, double>> sorted;  // (key, e) ascending: filters only
};

SampleRowView ViewRow(const float* x, int64_t V, const SampleParams& p) {
  SampleRowView v;
  v.key.resize(V), v.e.resize(V);
  const float m = *std::max_element(x, x + V);
  for (int64_t i = 0; i < V; ++i) {
    const float a = (m - x[i]) / p.temperature;
    uint32_t k;
    std::memcpy(&k, &a, sizeof(k));
    v.key[i] = a == 0.0f ? 0u : k;
    v.e[i] = std::exp(-static_cast<double>(a));
  }
  if ((p.top_k > 0 && p.top_k < V) || p.top_p < 1.0f) {
    v.sorted.resize(V);
    for (int64_t i = 0; i < V; ++i) v.sorted[i] = {v.key[i], v.e[i]};
    std::sort(v.sorted.begin(), v.sorted.end());
  }
  return v;
}

// The kept set's key threshold with top_p replaced by `top_p` (sample.h: K_k, then K_p of the
// top_k set's mass).
uint32_t Threshold(const SampleRowView& v, int32_t top_k, double top_p) {
  const int64_t V = static_cast<int64_t>(v.key.size());
  uint32_t k_max = 0xffffffffu;
  if (top_k > 0 && top_k < V) k_max = v.sorted[top_k - 1].first;
  if (top_p < 1.0) {
    int64_t n = 0;  // {key <= K_k} is sorted[0, n)
    double mass_k = 0, mass = 0;
    while (n < V && v.sorted[n].first <= k_max) mass_k += v.sorted[n++].second;
    for (int64_t i = 0; i < n; ++i) {
      mass += v.sorted[i].second;
      if ((i + 1 == n || v.sorted[i + 1].first != v.sorted[i].first) && mass >= top_p * mass_k) {
        k_max = v.sorted[i].first;
        break;
      }
    }
  }
  return k_max;
}

// Whether token g fits u under threshold k_max with the CDF interval widened by kSampleTol; `near`
// says whether u lies within kSampleTol of g's interval ends.
bool FitsCdf(const SampleRowView& v, uint32_t k_max, float u, int32_t g, bool* near) {
  double zs = 0, before = -1, through = -1;
  for (size_t i = 0; i < v.key.size(); ++i) {
    if (v.key[i] > k_max) continue;
    if (static_cast<int64_t>(i) == g) before = zs;
    zs += v.e[i];
    if (static_cast<int64_t>(i) == g) through = zs;
  }
  if (before < 0 || !(v.e[g] > 0)) return false;  // g not kept, or of probability 0
  const double t = static_cast<double>(u) * zs, tol = kSampleTol * zs;
  if (near != nullptr) *near = std::abs(t - before) < tol || std::abs(t - through) < tol;
  return before - tol <= t && t < through + tol;
}

TEST(kernels_cuda, Sample) {
  SKIP_WITHOUT_GPU();
  constexpr float kAlmostOne = 0.99999994f;
  struct Case {
    int64_t R, V;
    float scale, temperature;
    int32_t top_k;
    float top_p;
    const char* what;  // "", "argmax" (must equal argmax), "-inf" (rows mostly -inf / -1e30),
                       // "ties" (logits rounded to integers: long runs of equal keys)
  };
  // top_p is taken of the top_k set: with both, the kernel gathers that set into shared memory
  // when it has at most 4096 tokens (kGather in sample.cu), else searches over the row: the cases
  // marked * take the second path (top_k > 4096; 4700 tokens tie at the top_k-th key).
  const std::vector<Case> cases = {
      {64, 151936, 8, 1, 0, 1, ""},          {64, 151936, 8, 0.7f, 50, 0.9f, ""},
      {64, 262144, 4, 1, 0, 0.95f, ""},      {1, 262144, 8, 1, 40, 1, ""},
      {64, 4097, 2, 1, 0, 0.8f, ""},         {64, 1000, 1, 1, 10, 1, ""},
      {64, 151936, 1, 0.01f, 0, 1, ""},      {64, 32000, 1, 100, 0, 1, ""},
      {64, 151936, 8, 1, 1000, 0.5f, ""},    {64, 151936, 1, 1, 1, 1, "argmax"},
      {64, 151936, 1, 1, 0, 1e-6f, "argmax"}, {64, 151936, 4, 1, 0, 1, "-inf"},
      {64, 65536, 4, 1, 20, 0.9f, "-inf"},   {64, 151936, 2, 1, 4096, 0.95f, ""},
      {16, 151936, 2, 1, 5000, 0.9f, ""} /* * */, {64, 151936, 2, 0.5f, 200, 0.3f, ""},
      {64, 1000, 2, 1, 100, 0.6f, ""},       {64, 151936, 40, 10, 2000, 0.5f, "ties"},
      {64, 151936, 4, 1, 4000, 0.9f, "ties"} /* * */,
  };
  for (const Case& c : cases) {
    const int64_t R = c.R, V = c.V;
    auto x = RandomFloats(R * V, c.scale);
    const bool neg = std::string(c.what) == "-inf";
    if (std::string(c.what) == "ties") {
      for (float& v : x) v = std::round(v);
    }
    if (neg) {
      // Row r: two tokens of three at -inf (even rows) or -1e30 (odd rows): probability 0.
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t i = 0; i < V; ++i) {
          if (i % 3 != 1) x[r * V + i] = r % 2 == 0 ? -INFINITY : -1e30f;
        }
      }
    }
    std::vector<SampleParams> params(R);
    std::uniform_real_distribution<float> unif(0.0f, 1.0f);
    for (int64_t r = 0; r < R; ++r) {
      params[r].temperature = c.temperature, params[r].top_k = c.top_k, params[r].top_p = c.top_p;
      params[r].u = r == 0 ? 0.0f : r == 1 ? kAlmostOne : std::min(unif(Rng()), kAlmostOne);
    }
    DeviceBuffer<float> d_x(x);
    DeviceBuffer<int32_t> d_out(R);
    d_out.Poison();
    sample(d_out.get(), d_x.get(), params.data(), R, V, nullptr);
    const auto got = d_out.Download();
    std::vector<int32_t> want(R), amax(R);
    ref::sample(want.data(), x.data(), params.data(), R, V);
    ref::argmax(amax.data(), x.data(), R, V);
    int exact = 0, ambiguous = 0;
    for (int64_t r = 0; r < R; ++r) {
      const SampleParams& p = params[r];
      const SampleRowView v = ViewRow(x.data() + r * V, V, p);
      ASSERT_GE(got[r], 0) << "row " << r;
      ASSERT_LT(got[r], V) << "row " << r;
      // Near a top_p boundary the kept set itself may differ: any of the three sets will do.
      const uint32_t k_ref = Threshold(v, p.top_k, p.top_p);
      std::vector<uint32_t> ks = {k_ref};
      if (p.top_p < 1.0f) {
        ks.push_back(Threshold(v, p.top_k, p.top_p * (1 - kSampleTol)));
        ks.push_back(Threshold(v, p.top_k, std::min(1.0, p.top_p * (1 + kSampleTol))));
      }
      bool near = false;
      EXPECT_TRUE(FitsCdf(v, k_ref, p.u, want[r], &near)) << "the reference's own choice, row " << r;
      const bool row_ambiguous = near || std::any_of(ks.begin(), ks.end(), [&](uint32_t k) { return k != k_ref; });
      bool fits = false;
      for (uint32_t k : ks) fits = fits || FitsCdf(v, k, p.u, got[r], nullptr);
      EXPECT_TRUE(fits) << c.V << " row " << r << ": got " << got[r] << ", ref " << want[r] << " (u " << p.u << ")";
      if (got[r] == want[r]) {
        ++exact;
      } else {
        EXPECT_TRUE(row_ambiguous) << c.V << " row " << r << ": got " << got[r] << ", ref " << want[r]
                                   << " with u " << p.u << " away from every boundary";
      }
      ambiguous += row_ambiguous ? 1 : 0;
      if (std::string(c.what) == "argmax") {
        // The argmax when the maximum is unique; with equal maxima (RandomFloats has 2^24 values, so
        // about one row in 100 of 151936 ties) every one is kept and u picks: any of them.
        const float* row = x.data() + r * V;
        if (std::count(row, row + V, row[amax[r]]) == 1) {
          EXPECT_EQ(got[r], amax[r]) << "row " << r;
        } else {
          EXPECT_EQ(row[got[r]], row[amax[r]]) << "row " << r << ": not one of the equal maxima";
        }
      }
      if (neg) {
        EXPECT_EQ(got[r] % 3, 1) << "row " << r << " chose a token of probability 0";
      }
    }
    std::printf("sample %-14s T %-5g top_k %-4d top_p %-6g %-6s: %d/%lld exact, %d ambiguous; got %d %d %d, ref %d %d %d\n",
                Shape({R, V}).c_str(), c.temperature, c.top_k, c.top_p, c.what, exact, static_cast<long long>(R),
                ambiguous, got[0], R > 1 ? got[1] : -1, R > 2 ? got[2] : -1, want[0], R > 1 ? want[1] : -1,
                R > 2 ? want[2] : -1);
  }
}

}  // namespace
}  // namespace tandem::kernels
