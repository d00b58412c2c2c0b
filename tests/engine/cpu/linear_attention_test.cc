// The hybrid models' reference ops (engine/cpu/linear_attention.h) against hand-computed values:
// the causal conv1d update and its state, l2norm, the gated delta rule (decay, the delta write,
// the read), the gated RMSNorm, softplus / sigmoid gates, and the whole DeltaNet token against
// the same steps written out.
#include <cmath>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include "engine/cpu/linear_attention.h"

namespace tandem::engine::cpu {
namespace {

double Silu(double x) { return x / (1 + std::exp(-x)); }

TEST(LinearAttention, CausalConv1dKeepsTheLastInputs) {
  // Width 3, weights {1, 2, 3}: the pre-activation sums are 3*1, 2*1 + 3*2, 1*1 + 2*2 + 3*3, then
  // 1*2 + 2*3 + 3*4 (the first input has left the window).
  const std::vector<float> w = {1, 2, 3};
  std::vector<float> state(2, 0.0f);
  const double want[] = {3, 8, 14, 20};
  for (int t = 0; t < 4; ++t) {
    float x = static_cast<float>(t + 1), out = 0;
    causal_conv1d_update(&out, state.data(), &x, w.data(), 1, 3);
    std::printf("  t=%d out %.6f want silu(%g) = %.6f\n", t, out, want[t], Silu(want[t]));
    EXPECT_NEAR(out, Silu(want[t]), 1e-5);
  }
  EXPECT_EQ(state[0], 3.0f);
  EXPECT_EQ(state[1], 4.0f);
}

TEST(LinearAttention, L2Norm) {
  std::vector<float> x = {3, 4};
  l2norm(x.data(), 2, 0.0f);
  EXPECT_NEAR(x[0], 0.6, 1e-7);
  EXPECT_NEAR(x[1], 0.8, 1e-7);
}

TEST(LinearAttention, GatedDeltaRuleByHand) {
  // dk 2, dv 1. Step 1 from S = 0, no decay, beta 1: writes v = 2 at k = e0; o = S^T e0 = 2.
  std::vector<float> S(2, 0.0f);
  float o = 0;
  const float e0[] = {1, 0}, e1[] = {0, 1};
  float v = 2;
  gated_delta_rule_step(&o, S.data(), e0, e0, &v, 0.0f, 1.0f, 2, 1);
  EXPECT_FLOAT_EQ(o, 2.0f);
  // Step 2: decay exp(g) = 0.5 gives S = (1, 0); u = 1; beta 0.5 moves it halfway to v = 3: S = (2, 0).
  v = 3;
  gated_delta_rule_step(&o, S.data(), e1, e0, &v, std::log(0.5f), 0.5f, 2, 1);
  EXPECT_NEAR(S[0], 2.0, 1e-6);
  EXPECT_EQ(S[1], 0.0f);
  EXPECT_NEAR(o, 0.0, 1e-7);  // read at e1, where nothing was written
}

TEST(LinearAttention, DeltaRuleWithBetaOneStoresV) {
  // With beta 1 and a unit k, S^T k == v after the step whatever S held (the delta rule's point).
  std::mt19937 rng(7);
  std::normal_distribution<float> n01;
  const int dk = 8, dv = 5;
  std::vector<float> S(dk * dv), k(dk), v(dv), o(dv);
  for (float& s : S) s = n01(rng);
  for (float& x : k) x = n01(rng);
  for (float& x : v) x = n01(rng);
  l2norm(k.data(), dk, 0.0f);
  gated_delta_rule_step(o.data(), S.data(), k.data(), k.data(), v.data(), -0.3f, 1.0f, dk, dv);
  for (int j = 0; j < dv; ++j) {
    std::printf("  [%d] S^T k %.6f v %.6f\n", j, o[j], v[j]);
    EXPECT_NEAR(o[j], v[j], 1e-5);
  }
}

TEST(LinearAttention, GatedRmsNorm) {
  // rmsnorm({1, 1}) = {1, 1}; times w = 2; times silu(0) = 0 and silu(30) ~ 30.
  const std::vector<float> x = {1, 1}, w = {2, 2}, z = {0, 30};
  std::vector<float> y(2);
  gated_rmsnorm(y.data(), x.data(), w.data(), z.data(), 1, 2, 0.0f);
  EXPECT_NEAR(y[0], 0.0, 1e-7);
  EXPECT_NEAR(y[1], 2 * Silu(30), 1e-4);
}

TEST(LinearAttention, GatesAndSoftplus) {
  EXPECT_NEAR(softplus(0.0), std::log(2.0), 1e-12);
  EXPECT_EQ(softplus(25.0), 25.0);
  EXPECT_NEAR(sigmoid(0.0), 0.5, 1e-12);
  std::vector<float> att = {2, 4}, gate = {0, 100, 0, 0};
  sigmoid_gate(att.data(), gate.data(), 1, 2, 4);
  EXPECT_FLOAT_EQ(att[0], 1.0f);
  EXPECT_FLOAT_EQ(att[1], 4.0f);
}

TEST(LinearAttention, DeltaNetTokenMatchesTheStepsWrittenOut) {
  // n_k 1, n_v 2 (both value heads read key head 0), dk 2, dv 2, conv width 2.
  const DeltaNetLayout D{1, 2, 2, 2, 2};
  ASSERT_EQ(D.conv_dim(), 8);
  std::vector<float> conv_w(D.conv_dim() * 2), conv_state(D.conv_state_size(), 0.0f), state(D.state_size(), 0.0f);
  for (size_t i = 0; i < conv_w.size(); ++i) conv_w[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  const std::vector<float> A_log = {0.1f, -0.5f}, dt_bias = {0.3f, 0.0f}, b = {0.2f, -1.0f}, a = {0.5f, 1.5f};
  std::vector<float> x0 = {1, 2, -1, 0.5f, 0.3f, -0.7f, 1.1f, 0.2f};
  std::vector<float> qkv = x0, o(D.value_dim());
  gated_deltanet_token(o.data(), qkv.data(), conv_state.data(), state.data(), b.data(), a.data(), conv_w.data(),
                       A_log.data(), dt_bias.data(), D);
  // Written out: first token, so the conv sees only its own input (weight index 1 of each channel).
  std::vector<double> c(8);
  for (int i = 0; i < 8; ++i) c[i] = Silu(conv_w[i * 2 + 1] * x0[i]);
  auto norm = [](double x, double y) { return std::sqrt(x * x + y * y + 1e-6); };
  const double nq = norm(c[0], c[1]), nk = norm(c[2], c[3]);
  const double q[2] = {c[0] / nq / std::sqrt(2.0), c[1] / nq / std::sqrt(2.0)}, k[2] = {c[2] / nk, c[3] / nk};
  for (int h = 0; h < 2; ++h) {
    const double beta = 1 / (1 + std::exp(-b[h]));
    // From S = 0 the decay does nothing: S = k (beta v)^T, o = S^T q = (k.q) beta v.
    const double kq = k[0] * q[0] + k[1] * q[1];
    for (int j = 0; j < 2; ++j) {
      const double want = kq * beta * c[4 + h * 2 + j];
      std::printf("  head %d [%d] got %.7f want %.7f\n", h, j, o[h * 2 + j], want);
      EXPECT_NEAR(o[h * 2 + j], want, 1e-6);
    }
  }
  // The conv state now holds the raw input.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(conv_state[i], x0[i]);
  // A second token decays the state by exp(g) = exp(-exp(A_log) softplus(a + dt_bias)) first:
  // with v = 0 and beta -> 0 (b very negative) the read is the decayed first state.
  std::vector<float> S1 = state, b2 = {-80.0f, -80.0f}, qkv2(8, 0.0f), o2(4);
  gated_deltanet_token(o2.data(), qkv2.data(), conv_state.data(), state.data(), b2.data(), a.data(), conv_w.data(),
                       A_log.data(), dt_bias.data(), D);
  for (int h = 0; h < 2; ++h) {
    const double g = -std::exp(A_log[h]) * std::log1p(std::exp(a[h] + dt_bias[h]));
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(state[h * 4 + i], S1[h * 4 + i] * std::exp(g), 1e-6);
  }
}

}  // namespace
}  // namespace tandem::engine::cpu
