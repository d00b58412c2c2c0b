// The FP8 (e4m3) KV cache on the GPU against the CPU references: the store of qk_norm_rope_store_kv
// (V bit for bit with the host encoder, K within the norm's float32-vs-double rounding) and
// paged_attention over an e4m3 cache with per-layer scales (decode and prefill, every head_dim,
// fused and separate merges). Also, without a GPU: the host encoder (kernels/fp8.h) against
// cuda_fp8.h's own __nv_cvt_float_to_fp8 on every float of a wide sweep.
#include <cuda_fp8.h>

#include <algorithm>
#include <numeric>

#include "kernels/attention.h"
#include "kernels/fp8.h"
#include "kernels/qk_norm_rope.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomBf16;
using testing::RandomFloats;
using testing::Rng;
using testing::Shape;

constexpr double kBound = 1e-3;

// Random e4m3 codes of magnitude up to about 2^3 (no NaN): a K or V cache's contents.
std::vector<fp8_e4m3> RandomFp8(size_t n) {
  std::vector<fp8_e4m3> v(n);
  for (auto& x : v) {
    const uint8_t mag = static_cast<uint8_t>(Rng()() % 0x58);  // below exponent 11: |x| < 16
    x.bits = static_cast<uint8_t>(mag | ((Rng()() & 1) << 7));
  }
  return v;
}

std::vector<float> Decode(const std::vector<fp8_e4m3>& v, float scale) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = E4m3Decode(v[i].bits) * scale;
  return f;
}

TEST(kv_fp8, HostEncoderMatchesCudaFp8) {
  // Every 97th float bit pattern of both signs (NaN included), and every code's neighbourhood.
  int64_t checked = 0;
  auto check = [&](float x) {
    const uint8_t cuda = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    ASSERT_EQ(FloatToE4m3(x), cuda) << x;
    ++checked;
  };
  for (uint64_t u = 0; u <= 0xffffffffull; u += 97) {
    float x;
    const uint32_t b = static_cast<uint32_t>(u);
    std::memcpy(&x, &b, 4);
    check(x);
  }
  for (int code = 0; code < 256; ++code) {
    const float f = E4m3ToFloat(static_cast<uint8_t>(code));
    if (std::isnan(f)) continue;
    float up = f, down = f;
    for (int i = 0; i < 64; ++i) check(up = std::nextafter(up, 1e9f)), check(down = std::nextafter(down, -1e9f));
  }
  std::printf("host e4m3 encoder == __nv_cvt_float_to_fp8 on %lld floats\n", static_cast<long long>(checked));
}

TEST(kv_fp8, QkNormRopeStoresE4m3) {
  SKIP_WITHOUT_GPU();
  for (const QkvLayout& L : {QkvLayout{8, 4, 32, 32}, QkvLayout{32, 4, 128, 128}, QkvLayout{4, 2, 256, 64}}) {
    const int64_t slots = 48, T = 11;
    const KvScale s{0.75f, 0.5f};  // v's a power of two: x / 0.5 is exact on both sides
    auto qkv = RandomFloats(T * L.row(), 4.0f);
    // V values that test the encoder: past 448 * 0.5, midpoints between codes, subnormals, zeros.
    float* v0 = qkv.data() + L.q_dim() + L.kv_dim();
    // Stored as 2x: 600 and -2e6 saturate, 448 exact, 464 the tie above 448 (saturates), zeros,
    // 1.5 * 2^-9 (a tie between subnormals: to the even code 2), 0.53125 (a tie: to 0.5).
    const float special[] = {300.0f, -1e6f, 224.0f, 232.0f, 0.0f, -0.0f, 0.5f * 0.0029296875f, 0.5f * 0.53125f};
    for (size_t i = 0; i < sizeof(special) / sizeof(float); ++i) v0[i] = special[i];
    const std::vector<float> qkv_in = qkv;
    auto qn = RandomBf16(L.head_dim), kn = RandomBf16(L.head_dim);
    std::vector<float> inv_freq(L.rotary_dim / 2);
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = 1.0f / std::pow(1e6f, 2.0f * i / L.rotary_dim);
    std::vector<int32_t> pos(T), slot(T), perm(slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(Rng()() % 5000), slot[t] = perm[t];
    DeviceBuffer<float> d_qkv(qkv), d_inv(inv_freq);
    DeviceBuffer<bf16_bits> d_qn(qn), d_kn(kn);
    DeviceBuffer<fp8_e4m3> d_kc(slots * L.kv_dim()), d_vc(slots * L.kv_dim());
    DeviceBuffer<int32_t> d_pos(pos), d_slot(slot);
    d_kc.Poison();
    d_vc.Poison();
    qk_norm_rope_store_kv(d_qkv.get(), d_kc.get(), d_vc.get(), d_qn.get(), d_kn.get(), d_inv.get(), d_pos.get(),
                          d_slot.get(), T, L, 1e-6f, nullptr, 0.0f, s);
    std::vector<fp8_e4m3> kc(slots * L.kv_dim(), fp8_e4m3{0xff}), vc(slots * L.kv_dim(), fp8_e4m3{0xff});
    ref::qk_norm_rope_store_kv(qkv.data(), kc.data(), vc.data(), qn.data(), kn.data(), inv_freq.data(), pos.data(),
                               slot.data(), T, L, 1e-6f, 0.0f, s);
    const std::string tag = "qk_norm_rope fp8 " + Shape({L.n_heads, L.n_kv_heads, L.head_dim, L.rotary_dim, T});
    ExpectClose(tag + " qkv", d_qkv.Download(), qkv, kBound);
    auto got_k = d_kc.Download(), got_v = d_vc.Download();
    std::vector<float> gk, wk;
    int64_t v_diff = 0, k_far = 0;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < L.kv_dim(); ++i) {
        const int64_t o = slot[t] * L.kv_dim() + i;
        v_diff += got_v[o].bits != vc[o].bits;
        // K: the norm in float32 vs double may move a value across a rounding boundary: one code.
        k_far += std::abs(static_cast<int>(got_k[o].bits & 0x7f) - static_cast<int>(kc[o].bits & 0x7f)) > 1;
        gk.push_back(E4m3Decode(got_k[o].bits) * s.k), wk.push_back(E4m3Decode(kc[o].bits) * s.k);
      }
    }
    EXPECT_EQ(v_diff, 0) << tag << ": v codes differ from the host encoder's";
    EXPECT_EQ(k_far, 0) << tag << ": k codes more than one step from the reference's";
    ExpectClose(tag + " k cache (decoded)", gk, wk, 2e-2);
  }
}

// As kernels_cuda_test's PagedAttention, over e4m3 caches with per-layer scales.
TEST(kv_fp8, PagedAttentionOverE4m3) {
  SKIP_WITHOUT_GPU();
  struct Case { const char* kind; int64_t nh, nkv, hd, bs, seqs, ctx, chunk, wide = 0; };
  for (const Case& c : {Case{"decode", 8, 4, 32, 16, 3, 40, 1}, Case{"decode", 32, 4, 128, 16, 4, 1000, 1},
                        Case{"decode", 32, 4, 128, 16, 1, 4100, 1}, Case{"decode", 16, 16, 64, 32, 2, 77, 1},
                        Case{"decode", 16, 2, 256, 16, 2, 600, 1, 2048}, Case{"prefill", 8, 4, 32, 16, 2, 33, 33},
                        Case{"prefill", 32, 4, 128, 16, 2, 300, 200}, Case{"prefill", 4, 2, 64, 16, 1, 300, 8, 1024}}) {
    for (const KvScale s : {KvScale{}, KvScale{0.37f, 2.5f}}) {
      const int64_t wide = std::max(c.wide, c.ctx);
      AttentionShape A;
      A.n_heads = c.nh, A.n_kv_heads = c.nkv, A.head_dim = c.hd, A.block_size = c.bs;
      A.max_blocks = (wide + c.bs - 1) / c.bs;
      A.q_stride = c.nh * c.hd + 2 * c.nkv * c.hd;
      const int64_t num_blocks = c.seqs * A.max_blocks + 3, kv_dim = c.nkv * c.hd;
      std::vector<int32_t> perm(num_blocks);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), Rng());
      std::vector<int32_t> tables(perm.begin(), perm.begin() + c.seqs * A.max_blocks), token_seq, pos;
      for (int64_t sq = 0; sq < c.seqs; ++sq) {
        for (int64_t i = 0; i < c.chunk; ++i) {
          token_seq.push_back(static_cast<int32_t>(sq));
          pos.push_back(static_cast<int32_t>(c.ctx - c.chunk + i));
        }
      }
      const int64_t T = static_cast<int64_t>(pos.size()), n_counters = attention_counter_count(T, A);
      auto q = RandomFloats(T * A.q_stride, 0.3f);
      auto kc = RandomFp8(num_blocks * c.bs * kv_dim), vc = RandomFp8(num_blocks * c.bs * kv_dim);
      DeviceBuffer<float> d_q(q), d_out(T * c.nh * c.hd), d_scratch(attention_scratch_floats(T, A, wide));
      DeviceBuffer<uint32_t> d_counters(n_counters);
      CUDA_CHECK(cudaMemset(d_counters.get(), 0, n_counters * sizeof(uint32_t)));
      DeviceBuffer<fp8_e4m3> d_kc(kc), d_vc(vc);
      DeviceBuffer<int32_t> d_tables(tables), d_seq(token_seq), d_pos(pos);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
      std::vector<float> want(T * c.nh * c.hd);
      ref::paged_attention(want.data(), q.data(), kc.data(), vc.data(), tables.data(), token_seq.data(), pos.data(),
                           T, A, scale, s);
      const std::string tag = std::string("paged_attention fp8 ") + c.kind + " " +
                              Shape({c.nh, c.nkv, c.hd, c.bs, c.seqs, c.ctx, c.chunk, wide}) +
                              (s.k == 1.0f ? "" : " scaled");
      std::vector<float> first;
      for (int run = 0; run < 3; ++run) {
        d_out.Poison();
        d_scratch.Poison();
        paged_attention(d_out.get(), d_scratch.get(), run < 2 ? d_counters.get() : nullptr, d_q.get(), d_kc.get(),
                        d_vc.get(), d_tables.get(), d_seq.get(), d_pos.get(), T, A, wide, scale, nullptr, s);
        const std::vector<float> got = d_out.Download();
        const std::string name = tag + (run == 0 ? " fused" : run == 1 ? " fused again" : " separate");
        ExpectClose(name, got, want, kBound);
        if (run == 0) {
          first = got;
        } else {
          EXPECT_TRUE(got == first) << name << ": not the bits of the first fused launch";
        }
      }
      EXPECT_EQ(d_counters.Download(), std::vector<uint32_t>(n_counters, 0u)) << tag << ": counters not left at 0";
      // The scales are applied: the same as a float32 cache holding the decoded, scaled values.
      if (s.k != 1.0f) {
        auto kf = Decode(kc, s.k), vf = Decode(vc, s.v);
        std::vector<float> want_f32(want.size());
        ref::paged_attention(want_f32.data(), q.data(), kf.data(), vf.data(), tables.data(), token_seq.data(),
                             pos.data(), T, A, scale);
        ExpectClose(tag + " vs f32 cache of the scaled values", first, want_f32, kBound);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
