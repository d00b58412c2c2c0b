// The reference ops (engine/cpu/ops.{h,cc}) against hand-computed values: rmsnorm, rope, softmax,
// top-k, silu_mul, the router, matmul threaded vs a naive loop, the experts grouped by expert vs
// one pair at a time, attention.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "engine/cpu/ops.h"

namespace tandem::engine::cpu {
namespace {

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << "index " << i;
    std::printf("  [%zu] got %.7f want %.7f\n", i, got[i], want[i]);
  }
}

TEST(Ops, RmsNorm) {
  // mean(x^2) = 30/4 = 7.5, so x / sqrt(7.5) = x * 0.3651484; the last weight is 2.
  std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 1, 2}, y(4);
  rmsnorm(y.data(), x.data(), w.data(), 1, 4, 0.0f);
  ExpectNear(y, {0.3651484, 0.7302967, 1.0954451, 2.9211870});
}

TEST(Ops, RopeRotateHalf) {
  // head_dim 4, theta 10000: inv_freq = {1, 0.01}; pairs (0, 2) and (1, 3); position 1.
  auto inv = rope_inv_freq(10000.0, 4);
  ExpectNear(inv, {1.0, 0.01});
  std::vector<float> x = {1, 2, 3, 4};
  rope(x.data(), 1, 4, 4, 1, inv.data());
  // x0' = 1 cos1 - 3 sin1, x2' = 3 cos1 + 1 sin1, x1' = 2 cos.01 - 4 sin.01, x3' = 4 cos.01 + 2 sin.01
  ExpectNear(x, {-1.9841106, 1.9599007, 2.4623779, 4.0197997}, 1e-5);
  // Position 0 is the identity.
  std::vector<float> y = {1, 2, 3, 4};
  rope(y.data(), 1, 4, 4, 0, inv.data());
  ExpectNear(y, {1, 2, 3, 4});
}

TEST(Ops, RopePartialRotaryLeavesTheRestAlone) {
  // rotary_dim 2 of head_dim 4: one pair (0, 1) with inv_freq 1 at position 2; dims 2, 3 pass.
  auto inv = rope_inv_freq(10000.0, 2);
  std::vector<float> x = {1, 2, 3, 4, /* second head */ 1, 2, 3, 4};
  rope(x.data(), 2, 4, 2, 2, inv.data());
  ExpectNear(x, {-2.2347417, 0.0770038, 3, 4, -2.2347417, 0.0770038, 3, 4}, 1e-5);
}

TEST(Ops, SoftmaxTopkSiluMul) {
  std::vector<float> p = {1, 2, 3};
  softmax(p.data(), 3);
  ExpectNear(p, {0.0900306, 0.2447285, 0.6652410});
  // Ties go to the lower index (as torch.topk on CPU in practice; ties are measure-zero anyway).
  std::vector<float> probs = {0.1f, 0.4f, 0.05f, 0.4f, 0.05f};
  std::vector<int32_t> idx(3);
  std::vector<float> val(3);
  topk(idx.data(), val.data(), probs.data(), 5, 3);
  EXPECT_EQ(idx, (std::vector<int32_t>{1, 3, 0}));
  ExpectNear(val, {0.4, 0.4, 0.1});
  // One row of [gate | up]: silu(1) * 2, silu(0) * 5, silu(-1) * 1.
  std::vector<float> gate_up = {1, 0, -1, 2, 5, 1}, o(3);
  silu_mul(o.data(), gate_up.data(), 1, 3);
  ExpectNear(o, {1.4621172, 0.0, -0.2689414});
}

TEST(Ops, MatmulThreadedEqualsNaive) {
  // y (2, 2) = x (2, 3) W^T, W (2, 3): by hand.
  ThreadPool one(1);
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, w = {1, 0, -1, 0.5, 0.5, 0.5}, y(4);
  matmul(&one, y.data(), x.data(), w.data(), 2, 3, 2);
  ExpectNear(y, {-2, 3, -2, 7.5});
  // Large enough to run on 3 threads: equal to the naive triple loop (same summation order).
  const int64_t R = 5, I = 96, O = 301;
  std::vector<float> xb(R * I), wb(O * I), y1(R * O), y3(R * O);
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = std::sin(0.1f * i);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = std::cos(0.07f * i);
  ThreadPool three(3);
  matmul(&three, y3.data(), xb.data(), wb.data(), R, I, O);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t o = 0; o < O; ++o) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i) s += static_cast<double>(xb[r * I + i]) * wb[o * I + i];
      ASSERT_NEAR(y3[r * O + o], s, 1e-4) << r << "," << o;
    }
  }
}

TEST(Ops, RouterTopkRenormalises) {
  // softmax(log 1..4) = (1, 2, 3, 4) / 10: the top 2 are experts 3 and 2.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  router_topk(ids.data(), w.data(), logits.data(), 1, 4, 2, /*renormalize=*/false);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 2}));
  ExpectNear(w, {0.4, 0.3});
  router_topk(ids.data(), w.data(), logits.data(), 1, 4, 2, /*renormalize=*/true);
  ExpectNear(w, {4.0 / 7, 3.0 / 7});
}

TEST(Ops, ExpertsGroupedByExpertEqualOnePairAtATime) {
  // 3 tokens, 2 experts each out of 3; gate_up (E, 2I, H), down (E, H, I).
  const int64_t T = 3, K = 2, E = 3, H = 8, I = 4;
  std::vector<float> x(T * H), gate_up(E * 2 * I * H), down(E * H * I);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * i);
  for (size_t i = 0; i < gate_up.size(); ++i) gate_up[i] = std::cos(0.11f * i);
  for (size_t i = 0; i < down.size(); ++i) down[i] = std::sin(0.07f * i + 1);
  const std::vector<int32_t> ids = {0, 2, 2, 1, 0, 1};
  const std::vector<float> weights = {0.7f, 0.3f, 0.6f, 0.4f, 0.5f, 0.5f};
  std::vector<float> act(T * K * I), out(T * H);
  ThreadPool two(2);
  moe_gate_up(&two, act.data(), x.data(), ids.data(), gate_up.data(), T, K, H, I);
  moe_down(&two, out.data(), act.data(), ids.data(), weights.data(), down.data(), T, K, H, I);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      double want = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = ids[t * K + k];
        double y = 0;
        for (int64_t i = 0; i < I; ++i) {
          double g = 0, u = 0;
          for (int64_t j = 0; j < H; ++j) {
            g += static_cast<double>(x[t * H + j]) * gate_up[(e * 2 * I + i) * H + j];
            u += static_cast<double>(x[t * H + j]) * gate_up[(e * 2 * I + I + i) * H + j];
          }
          y += g / (1 + std::exp(-g)) * u * down[(e * H + h) * I + i];
        }
        want += weights[t * K + k] * y;
      }
      EXPECT_NEAR(out[t * H + h], want, 1e-5) << t << "," << h;
    }
  }
}

TEST(Ops, PagedAttentionOfOnePositionIsItsValue) {
  // One token at position 0 of a sequence whose block table is {1} (block size 2): softmax over one
  // score is 1, so each q head returns the value of the kv head it reads (2 q heads per kv head).
  const kernels::AttentionShape A{4, 2, 2, 2, 1, 8};
  std::vector<float> q(8, 1.0f), k(4 * 2 * 2, 0.0f), v(4 * 2 * 2, 0.0f), out(8);
  const int32_t table = 1, seq = 0, pos = 0;
  for (int i = 0; i < 4; ++i) v[2 * 4 + i] = 10.0f + i;  // slot 2 = block 1, offset 0: kv heads 0, 1
  paged_attention(nullptr, out.data(), q.data(), k.data(), v.data(), &table, &seq, &pos, 1, A, 1.0f);
  ExpectNear(out, {10, 11, 10, 11, 12, 13, 12, 13});
}

}  // namespace
}  // namespace tandem::engine::cpu
