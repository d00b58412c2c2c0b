// The kernels the hybrid models (Qwen3-Next, Qwen3.5-MoE) add to the cuda backend's full-attention
// and MoE path, against their CPU references on fresh random inputs: the zero-centred norms
// ((1 + w), the 1 added in float32 by the norm kernels' w_offset) and gated attention's output gate
// (the shared expert's gate is router_topk's, in kernels_cuda_test). Bound ||out - ref|| / ||ref|| < 1e-3 as kernels_cuda_test.
// Skips (with the reason) where no GPU is present.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "kernels/norm_matmul.h"
#include "kernels/qk_norm_rope.h"
#include "kernels/rmsnorm.h"
#include "kernels/sigmoid_gate.h"
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
constexpr float kOffset = 1.0f;  // zero-centred: the weight is 1 + w
constexpr float kSmallW = 0.05f; // stored zero-centred weights are near 0

TEST(hybrid_kernels_cuda, ZeroCenteredAddRmsnorm) {
  SKIP_WITHOUT_GPU();
  for (auto [rows, n] : std::vector<std::array<int64_t, 2>>{{5, 128}, {3, 2048}, {2, 5000}}) {
    auto x = RandomFloats(rows * n), delta = RandomFloats(rows * n);
    auto w = RandomBf16(n, kSmallW);
    DeviceBuffer<float> d_x(x), d_delta(delta), d_out(rows * n);
    DeviceBuffer<bf16_bits> d_w(w);
    d_out.Poison();
    add_rmsnorm(d_out.get(), d_x.get(), d_delta.get(), d_w.get(), rows, n, 1e-6f, nullptr, kOffset);
    std::vector<float> want(rows * n);
    ref::add_rmsnorm(want.data(), x.data(), delta.data(), w.data(), rows, n, 1e-6f, kOffset);
    ExpectClose("zero-centred add_rmsnorm " + Shape({rows, n}), d_out.Download(), want, kBound);
    ExpectClose("zero-centred add_rmsnorm residual " + Shape({rows, n}), d_x.Download(), x, kBound);
  }
}

TEST(hybrid_kernels_cuda, ZeroCenteredAddRmsnormMatmul) {
  SKIP_WITHOUT_GPU();
  for (auto [T, in, out] : std::vector<std::array<int64_t, 3>>{{1, 2048, 512}, {3, 128, 384}, {13, 512, 200}}) {
    auto x = RandomFloats(T * in), delta = RandomFloats(T * in);
    auto nw = RandomBf16(in, kSmallW);
    auto w = RandomBf16(out * in, 0.05f);
    DeviceBuffer<float> d_x(x), d_delta(delta), d_y(T * out), d_xo(T * in), d_xn(T * in);
    DeviceBuffer<bf16_bits> d_nw(nw), d_w(w);
    d_y.Poison(), d_xo.Poison(), d_xn.Poison();
    add_rmsnorm_matmul(d_y.get(), d_xo.get(), d_xn.get(), d_x.get(), d_delta.get(), d_nw.get(), d_w.get(), T, in, out,
                       1e-6f, nullptr, kOffset);
    std::vector<float> y(T * out), xo(T * in), xn(T * in);
    ref::add_rmsnorm_matmul(y.data(), xo.data(), xn.data(), x.data(), delta.data(), nw.data(), w.data(), T, in, out,
                            1e-6f, kOffset);
    const std::string tag = "zero-centred add_rmsnorm_matmul " + Shape({T, in, out});
    ExpectClose(tag + " y", d_y.Download(), y, kBound);
    ExpectClose(tag + " normed", d_xn.Download(), xn, kBound);
  }
}

// Partial RoPE (rotary_dim a quarter of head_dim, as Qwen3.5 / Qwen3-Next) with (1 + w) q/k norms,
// float32 KV cache, and rows that end with gated attention's gate values (QkvLayout::gate_dim),
// which must come out untouched.
TEST(hybrid_kernels_cuda, ZeroCenteredQkNormPartialRope) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::pair<QkvLayout, int64_t>> cases = {
      {{8, 2, 32, 8, 256}, 9}, {{16, 2, 256, 64}, 5}, {{4, 1, 256, 64, 1024}, 3}};
  for (const auto& [L, T] : cases) {
    const int64_t slots = 32;
    auto qkv = RandomFloats(T * L.row());
    const std::vector<float> qkv_in = qkv;
    auto qn = RandomBf16(L.head_dim, kSmallW), kn = RandomBf16(L.head_dim, kSmallW);
    std::vector<float> inv_freq(L.rotary_dim / 2);
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = 1.0f / std::pow(1e7f, 2.0f * i / L.rotary_dim);
    std::vector<int32_t> pos(T), slot(T);
    std::vector<int32_t> perm(slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(Rng()() % 5000), slot[t] = perm[t];
    DeviceBuffer<float> d_qkv(qkv), d_inv(inv_freq), d_kc(slots * L.kv_dim()), d_vc(slots * L.kv_dim());
    DeviceBuffer<bf16_bits> d_qn(qn), d_kn(kn);
    DeviceBuffer<int32_t> d_pos(pos), d_slot(slot);
    d_kc.Poison(), d_vc.Poison();
    qk_norm_rope_store_kv(d_qkv.get(), d_kc.get(), d_vc.get(), d_qn.get(), d_kn.get(), d_inv.get(), d_pos.get(),
                          d_slot.get(), T, L, 1e-6f, nullptr, kOffset);
    std::vector<float> kc(slots * L.kv_dim()), vc(slots * L.kv_dim());
    ref::qk_norm_rope_store_kv(qkv.data(), kc.data(), vc.data(), qn.data(), kn.data(), inv_freq.data(), pos.data(),
                               slot.data(), T, L, 1e-6f, kOffset);
    const std::string tag =
        "zero-centred qk_norm_rope " + Shape({L.n_heads, L.n_kv_heads, L.head_dim, L.rotary_dim, L.gate_dim, T});
    const std::vector<float> got_qkv = d_qkv.Download();
    ExpectClose(tag + " qkv", got_qkv, qkv, kBound);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = L.gate_offset(); i < L.row(); ++i) {
        ASSERT_EQ(got_qkv[t * L.row() + i], qkv_in[t * L.row() + i]) << tag << " gate value " << t << "," << i;
      }
    }
    auto got_k = d_kc.Download();
    std::vector<float> gk, wk;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < L.kv_dim(); ++i) {
        gk.push_back(got_k[slot[t] * L.kv_dim() + i]), wk.push_back(kc[slot[t] * L.kv_dim() + i]);
      }
    }
    ExpectClose(tag + " k cache", gk, wk, kBound);
  }
}

// att *= sigmoid(gate), the gate rows packed (stride n) or read from a wider row.
TEST(hybrid_kernels_cuda, SigmoidGate) {
  SKIP_WITHOUT_GPU();
  for (auto [T, n, stride] : std::vector<std::array<int64_t, 3>>{{1, 256, 256}, {7, 512, 512}, {33, 4096, 4096 + 64},
                                                                  {70, 1024, 1024}}) {
    auto att = RandomFloats(T * n), gates = RandomFloats(T * stride, 3.0f);
    DeviceBuffer<float> d_att(att), d_gates(gates);
    sigmoid_gate(d_att.get(), d_gates.get(), T, n, stride, nullptr);
    ref::sigmoid_gate(att.data(), gates.data(), T, n, stride);
    ExpectClose("sigmoid_gate " + Shape({T, n, stride}), d_att.Download(), att, kBound);
  }
}

}  // namespace
}  // namespace tandem::kernels
