// The CPU references of the hybrid models' kernels on hand-computed values, without a GPU (the
// kernels are checked against these in hybrid_kernels_cuda_test): the norms' w_offset (zero-centred
// (1 + w) weights), gated attention's sigmoid gate and the shared expert's gated add.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/bf16.h"
#include "kernels/norm_matmul.h"
#include "kernels/qk_norm_rope.h"
#include "kernels/rmsnorm.h"
#include "kernels/sigmoid_gate.h"
#include "tests/kernels/ref_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Bf16;
using testing::ExpectValues;
using testing::kNormed1234;

TEST(hybrid_kernels_ref, ZeroCenteredNormsUseOnePlusW) {
  // Stored w = (0, 0, 0, 1) with offset 1: weights (1, 1, 1, 2); w = 2^-12 keeps its value (bf16(1 + w) would be 1).
  std::vector<float> residual = {1, 2, 3, 4}, out(4);
  ref::add_rmsnorm(out.data(), residual.data(), nullptr, Bf16({0, 0, 0, 1}).data(), 1, 4, 0.0f, 1.0f);
  ExpectValues(out, {kNormed1234[0], kNormed1234[1], kNormed1234[2], 2 * kNormed1234[3]}, "add_rmsnorm offset 1");
  const float tiny = std::ldexp(1.0f, -12);
  ref::add_rmsnorm(out.data(), residual.data(), nullptr, Bf16({tiny, 0, 0, 0}).data(), 1, 4, 0.0f, 1.0f);
  EXPECT_NEAR(out[0], (1.0 + tiny) * kNormed1234[0], 1e-7);
  EXPECT_GT(out[0] - kNormed1234[0], 0.5 * tiny * kNormed1234[0]);
  // The fused norm + product: y = xn . (1, 1, 1, 1) with weights (1, 1, 1, 2).
  std::vector<float> y(1), x_out(4), xn(4);
  const std::vector<float> x_in = {1, 2, 3, 4};
  ref::add_rmsnorm_matmul(y.data(), x_out.data(), xn.data(), x_in.data(), nullptr, Bf16({0, 0, 0, 1}).data(),
                          Bf16({1, 1, 1, 1}).data(), 1, 4, 1, 0.0f, 1.0f);
  ExpectValues(y, {kNormed1234[0] + kNormed1234[1] + kNormed1234[2] + 2 * kNormed1234[3]}, "add_rmsnorm_matmul");
}

TEST(hybrid_kernels_ref, ZeroCenteredQkNorm) {
  // One q head and one kv head of 4 dims, no rotary dims (rotary_dim 0: RoPE passes every dim).
  const QkvLayout L{1, 1, 4, 0};
  std::vector<float> qkv = {1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8}, k(4), v(4);
  const std::vector<int32_t> pos = {3}, slot = {0};
  const auto qn = Bf16({0, 0, 0, 1}), kn = Bf16({-0.5f, 0, 0, 0});
  ref::qk_norm_rope_store_kv(qkv.data(), k.data(), v.data(), qn.data(), kn.data(), nullptr, pos.data(), slot.data(), 1,
                             L, 0.0f, 1.0f);
  ExpectValues({qkv.begin(), qkv.begin() + 4}, {kNormed1234[0], kNormed1234[1], kNormed1234[2], 2 * kNormed1234[3]},
               "q");
  ExpectValues(k, {0.5 * kNormed1234[0], kNormed1234[1], kNormed1234[2], kNormed1234[3]}, "k");
  ExpectValues(v, {5, 6, 7, 8}, "v");
}

TEST(hybrid_kernels_ref, SigmoidGate) {
  // sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4; the gates of row t at t * stride.
  std::vector<float> att = {2, 4, 8, 16};
  const float l3 = std::log(3.0f);
  const std::vector<float> gates = {0, l3, 99, -l3, 0, 99};
  ref::sigmoid_gate(att.data(), gates.data(), 2, 2, 3);
  ExpectValues(att, {1, 3, 2, 8}, "sigmoid_gate");
}

}  // namespace
}  // namespace tandem::kernels
