// The kernels' CPU references (kernels/*_ref.cc) on hand-computed values, without a GPU: the
// kernels are checked against these references (kernels_cuda_test), so a reference that drifted
// from the math would carry a kernel with it. bf16 weights here are exactly representable.
// (sample_ref has its own test, sample_ref_test.)
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/argmax.h"
#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/norm_matmul.h"
#include "kernels/qk_norm_rope.h"
#include "kernels/rmsnorm.h"
#include "kernels/router_topk.h"
#include "kernels/silu_mul.h"
#include "tests/kernels/ref_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Bf16;
using testing::ExpectValues;
using testing::kNormed1234;

TEST(kernels_ref, EmbeddingPicksRows) {
  const auto table = Bf16({0, 0.5f, 1, 1.5f, 2, 2.5f});  // (3, 2)
  const std::vector<int32_t> ids = {2, 0, 2};
  std::vector<float> out(6);
  ref::embedding(out.data(), ids.data(), table.data(), 3, 2);
  ExpectValues(out, {2, 2.5, 0, 0.5, 2, 2.5}, "embedding");
}

TEST(kernels_ref, AddRmsnormUpdatesTheResidual) {
  std::vector<float> residual = {1, 2, 3, 3}, delta = {0, 0, 0, 1}, out(4);
  const auto w = Bf16({1, 1, 1, 2});
  ref::add_rmsnorm(out.data(), residual.data(), delta.data(), w.data(), 1, 4, 0.0f);
  ExpectValues(residual, {1, 2, 3, 4}, "residual");
  ExpectValues(out, {kNormed1234[0], kNormed1234[1], kNormed1234[2], 2 * kNormed1234[3]}, "add_rmsnorm");
}

TEST(kernels_ref, MatmulAndNormMatmul) {
  // y (2, 2) = x (2, 3) W^T by hand.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const auto w = Bf16({1, 0, -1, 0.5f, 0.5f, 0.5f});
  std::vector<float> y(4);
  ref::matmul_bf16(y.data(), x.data(), w.data(), 2, 3, 2);
  ExpectValues(y, {-2, 3, -2, 7.5}, "matmul_bf16");
  // The fused sublayer input: x_out = x + delta, xn = rmsnorm(x_out), y = xn W^T with W picking
  // dims 0 and 3 (the latter doubled).
  const std::vector<float> x_in = {1, 2, 3, 3}, delta = {0, 0, 0, 1};
  const auto norm_w = Bf16({1, 1, 1, 1}), pick = Bf16({1, 0, 0, 0, 0, 0, 0, 2});
  std::vector<float> y2(2), x_out(4), xn(4);
  ref::add_rmsnorm_matmul(y2.data(), x_out.data(), xn.data(), x_in.data(), delta.data(), norm_w.data(), pick.data(),
                          1, 4, 2, 0.0f);
  ExpectValues(x_out, {1, 2, 3, 4}, "x_out");
  ExpectValues(xn, kNormed1234, "xn");
  ExpectValues(y2, {kNormed1234[0], 2 * kNormed1234[3]}, "add_rmsnorm_matmul");
}

TEST(kernels_ref, QkNormRopeAtPositionZeroNormsAndStores) {
  // One q head, one kv head, head_dim 4; position 0 rotates by nothing. Token 0 goes to slot 1.
  const QkvLayout L{1, 1, 4, 4};
  std::vector<float> qkv = {1, 2, 3, 4, /* k */ 2, 4, 6, 8, /* v */ 5, 6, 7, 8};
  const auto q_norm = Bf16({1, 1, 1, 1}), k_norm = Bf16({2, 2, 2, 2});
  const std::vector<float> inv_freq = {1.0f, 0.01f};
  const int32_t pos = 0, slot = 1;
  std::vector<float> k_cache(8, -1.0f), v_cache(8, -1.0f);
  ref::qk_norm_rope_store_kv(qkv.data(), k_cache.data(), v_cache.data(), q_norm.data(), k_norm.data(),
                             inv_freq.data(), &pos, &slot, 1, L, 0.0f);
  std::vector<double> k2(4);
  for (int i = 0; i < 4; ++i) k2[i] = 2 * kNormed1234[i];  // (2, 4, 6, 8) normed is (1, 2, 3, 4) normed
  ExpectValues(std::vector<float>(qkv.begin(), qkv.begin() + 4), kNormed1234, "q");
  ExpectValues(std::vector<float>(qkv.begin() + 4, qkv.begin() + 8), k2, "k");
  ExpectValues(std::vector<float>(k_cache.begin() + 4, k_cache.end()), k2, "k_cache slot 1");
  ExpectValues(std::vector<float>(v_cache.begin() + 4, v_cache.end()), {5, 6, 7, 8}, "v_cache slot 1");
  ExpectValues(std::vector<float>(k_cache.begin(), k_cache.begin() + 4), {-1, -1, -1, -1}, "k_cache slot 0");
}

TEST(kernels_ref, AttentionOverTwoPositionsWeighsByScore) {
  // One head of dim 2, block size 2, table {0}: keys (1, 0) and (0, 1), q = (ln 3, 0), scale 1:
  // scores ln 3 and 0, so weights 3/4 and 1/4 over values (4, 0) and (0, 8).
  const AttentionShape A{1, 1, 2, 2, 1, 2};
  const std::vector<float> q = {std::log(3.0f), 0};
  const auto k = Bf16({1, 0, 0, 1}), v = Bf16({4, 0, 0, 8});
  const int32_t table = 0, seq = 0, pos = 1;
  std::vector<float> out(2);
  ref::paged_attention(out.data(), q.data(), k.data(), v.data(), &table, &seq, &pos, 1, A, 1.0f);
  ExpectValues(out, {3, 2}, "paged_attention");
}

TEST(kernels_ref, RouterSiluAndExperts) {
  // softmax(log 1..4) = (1, 2, 3, 4) / 10: the top 2 are experts 3 and 2.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  ref::router_topk(ids.data(), w.data(), logits.data(), 1, 4, 2, /*renormalize=*/true);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 2}));
  ExpectValues(w, {4.0 / 7, 3.0 / 7}, "router_topk");
  // With the shared expert: a fifth logit, its gate (0: sigmoid 1/2), appended as expert 4.
  const std::vector<float> with_gate = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f), 0.0f};
  std::vector<int32_t> ids3(3);
  std::vector<float> w3(3);
  ref::router_topk(ids3.data(), w3.data(), with_gate.data(), 1, 4, 2, /*renormalize=*/true, /*shared_expert=*/true);
  EXPECT_EQ(ids3, (std::vector<int32_t>{3, 2, 4}));
  ExpectValues(w3, {4.0 / 7, 3.0 / 7, 0.5}, "router_topk with the shared expert");
  // silu(1) * 2, silu(0) * 5, silu(-1) * 1.
  const std::vector<float> gate_up = {1, 0, -1, 2, 5, 1};
  std::vector<float> o(3);
  ref::silu_mul(o.data(), gate_up.data(), 1, 3);
  ExpectValues(o, {1.4621171572600098, 0.0, -0.2689414213699951}, "silu_mul");
  // One token routed to expert 1 of 2 (H 2, I 1): gate = x0, up = x1, so act = silu(2) * 3; down
  // (1, 2) weighted by 0.5.
  const std::vector<float> x = {2, 3};
  const std::vector<int32_t> one = {1};
  const std::vector<float> half = {0.5f};
  const auto gu = Bf16({9, 9, 9, 9, /* expert 1: gate */ 1, 0, /* up */ 0, 1});
  const auto down = Bf16({9, 9, /* expert 1 */ 1, 2});
  std::vector<float> act(1), out(2);
  ref::moe_gate_up(act.data(), x.data(), one.data(), gu.data(), 1, 1, 2, 1);
  const double a = 3 * 2 / (1 + std::exp(-2.0));
  ExpectValues(act, {a}, "moe_gate_up");
  ref::moe_down(out.data(), act.data(), one.data(), half.data(), down.data(), 1, 1, 2, 1);
  ExpectValues(out, {0.5 * a, a}, "moe_down");
}

TEST(kernels_ref, ArgmaxTakesTheFirstOfTies) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1, 3, 3, 2, /* row 1 */ -inf, -inf, -5, -inf};
  std::vector<int32_t> out(2);
  ref::argmax(out.data(), x.data(), 2, 4);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2}));
}

}  // namespace
}  // namespace tandem::kernels
