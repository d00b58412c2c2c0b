// The FP8 (e4m3) KV cache's store on the GPU against the CPU reference: qk_norm_rope_store_kv into
// an e4m3 cache with per-layer scales (V bit for bit with the host encoder, K within the norm's
// float32-vs-double rounding). Attention over an e4m3 cache is kernels_cuda_test's PagedAttention.
// Also, without a GPU: the host encoder (kernels/fp8.h) against cuda_fp8.h's own
// __nv_cvt_float_to_fp8 on every float of a wide sweep.
#include <cuda_fp8.h>

#include <algorithm>
#include <cstring>
#include <numeric>

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

}  // namespace
}  // namespace tandem::kernels
