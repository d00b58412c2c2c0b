// The reference ops of the hybrid models (docs/model-notes.md, "Qwen3-Next and Qwen3.5-MoE"):
// the Gated DeltaNet's causal conv1d update, L2 norm, gated delta-rule recurrence and gated
// RMSNorm, plus the gates of full attention and the shared expert. One token at a time, plain
// loops in `Acc` like engine/cpu/ops.h (float for the cpu backend; double for kernel references).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "kernels/gated_deltanet.h"

namespace tandem::engine::cpu {

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// softplus(x) = log(1 + exp(x)), x itself above 20 (torch's threshold).
template <typename T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}

// One token through a causal depthwise conv1d of width K (no bias) and SiLU, per channel c:
// out[c] = silu(sum_j<K-1 w[c][j] state[c][j] + w[c][K-1] x[c]); then state[c] shifts by one
// and keeps x[c] last. state (channels, K-1) holds the K-1 previous inputs, oldest first (zeros
// at the start of a sequence); w (channels, K) as stored by Conv1d (channels, 1, K). out may be x.
template <typename Acc = float, typename W>
void causal_conv1d_update(float* out, float* state, const float* x, const W* w, int64_t channels, int64_t K) {
  for (int64_t c = 0; c < channels; ++c) {
    float* s = state + c * (K - 1);
    const W* wc = w + c * K;
    const float xc = x[c];
    Acc acc = 0;
    for (int64_t j = 0; j + 1 < K; ++j) acc += static_cast<Acc>(ToFloat(wc[j])) * static_cast<Acc>(s[j]);
    acc += static_cast<Acc>(ToFloat(wc[K - 1])) * static_cast<Acc>(xc);
    for (int64_t j = 0; j + 2 < K; ++j) s[j] = s[j + 1];
    if (K > 1) s[K - 2] = xc;
    out[c] = static_cast<float>(silu(acc));
  }
}

// x (n) *= 1 / sqrt(sum x^2 + eps) in place (transformers' l2norm, eps 1e-6).
template <typename Acc = float>
void l2norm(float* x, int64_t n, float eps) {
  const Acc ss = dot<Acc>(x, x, n);
  const Acc inv = Acc(1) / std::sqrt(ss + static_cast<Acc>(eps));
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<Acc>(x[i]) * inv);
}

// One token of the gated delta rule for one value head, state S (dk, dv) float32:
//   S <- exp(g) S;  u = S^T k;  S <- S + k (beta (v - u))^T;  o = S^T q.
// q, k (dk) already L2-normed (q also scaled by 1/sqrt(dk)); v, o (dv).
template <typename Acc = float>
void gated_delta_rule_step(float* o, float* S, const float* q, const float* k, const float* v, float g, float beta,
                           int64_t dk, int64_t dv) {
  const Acc decay = std::exp(static_cast<Acc>(g));
  std::vector<Acc> u(dv, Acc(0));
  for (int64_t i = 0; i < dk; ++i) {
    float* Si = S + i * dv;
    const Acc ki = k[i];
    for (int64_t j = 0; j < dv; ++j) {
      Si[j] = static_cast<float>(static_cast<Acc>(Si[j]) * decay);
      u[j] += static_cast<Acc>(Si[j]) * ki;
    }
  }
  for (int64_t j = 0; j < dv; ++j) u[j] = static_cast<Acc>(beta) * (static_cast<Acc>(v[j]) - u[j]);  // delta
  std::vector<Acc> acc(dv, Acc(0));
  for (int64_t i = 0; i < dk; ++i) {
    float* Si = S + i * dv;
    const Acc ki = k[i], qi = q[i];
    for (int64_t j = 0; j < dv; ++j) {
      Si[j] = static_cast<float>(static_cast<Acc>(Si[j]) + ki * u[j]);
      acc[j] += static_cast<Acc>(Si[j]) * qi;
    }
  }
  for (int64_t j = 0; j < dv; ++j) o[j] = static_cast<float>(acc[j]);
}

// out (rows, n) = (w * rmsnorm(x)) * silu(z), per row of n (the DeltaNet's output norm: plain w,
// not zero-centred). out may be x.
template <typename Acc = float, typename W>
void gated_rmsnorm(float* out, const float* x, const W* w, const float* z, int64_t rows, int64_t n, float eps) {
  rmsnorm<Acc>(out, x, w, rows, n, eps);
  for (int64_t i = 0; i < rows * n; ++i) {
    out[i] = static_cast<float>(static_cast<Acc>(out[i]) * silu(static_cast<Acc>(z[i])));
  }
}

// The shapes of one rank's Gated DeltaNet heads: the kernels' layout, as attention's QkvLayout is.
using kernels::DeltaNetLayout;

// The per-token part of the Gated DeltaNet before the recurrence: qkv (conv_dim) = [q (n_k, dk) |
// k (n_k, dk) | v (n_v, dv)] goes through the conv (conv_state (conv_dim, K-1) updated) and SiLU,
// then q and k are L2-normed per head and q scaled by 1/sqrt(dk), in place; per value head,
// beta = sigmoid(b) and the decay g = -exp(A_log) softplus(a + dt_bias) (b, a, A_log, dt_bias (n_v)).
template <typename Acc = float, typename W>
void gated_deltanet_prepare(float* qkv, float* conv_state, float* g, float* beta, const float* b, const float* a,
                            const W* conv_w, const W* A_log, const W* dt_bias, const DeltaNetLayout& D) {
  causal_conv1d_update<Acc>(qkv, conv_state, qkv, conv_w, D.conv_dim(), D.conv_kernel);
  float* q = qkv;
  float* k = qkv + D.key_dim();
  const float q_scale = static_cast<float>(Acc(1) / std::sqrt(static_cast<Acc>(D.dk)));
  for (int64_t h = 0; h < D.n_k; ++h) {
    l2norm<Acc>(q + h * D.dk, D.dk, 1e-6f);
    l2norm<Acc>(k + h * D.dk, D.dk, 1e-6f);
    for (int64_t i = 0; i < D.dk; ++i) q[h * D.dk + i] *= q_scale;
  }
  for (int64_t h = 0; h < D.n_v; ++h) {
    beta[h] = static_cast<float>(sigmoid(static_cast<Acc>(b[h])));
    g[h] = static_cast<float>(-std::exp(static_cast<Acc>(ToFloat(A_log[h]))) *
                              softplus(static_cast<Acc>(a[h]) + static_cast<Acc>(ToFloat(dt_bias[h]))));
  }
}

// The recurrence of value head h for one prepared token (qkv, g, beta as gated_deltanet_prepare
// leaves them): o_h (dv) = S_h^T q after the step, S_h = state + h dk dv. Value head h reads key
// head h / (n_v / n_k).
template <typename Acc = float>
void gated_deltanet_head(float* o_h, float* state, const float* qkv, const float* g, const float* beta, int64_t h,
                         const DeltaNetLayout& D) {
  const int64_t kh = h / (D.n_v / D.n_k);
  const float* q = qkv + kh * D.dk;
  const float* k = qkv + D.key_dim() + kh * D.dk;
  const float* v = qkv + 2 * D.key_dim() + h * D.dv;
  gated_delta_rule_step<Acc>(o_h, state + h * D.dk * D.dv, q, k, v, g[h], beta[h], D.dk, D.dv);
}

// One whole token of the Gated DeltaNet core for every value head, after the projections:
// gated_deltanet_prepare, then gated_deltanet_head for each value head into o (n_v, dv) (before
// the gated norm). state (n_v, dk, dv) and conv_state are the sequence's, updated.
template <typename Acc = float, typename W>
void gated_deltanet_token(float* o, float* qkv, float* conv_state, float* state, const float* b, const float* a,
                          const W* conv_w, const W* A_log, const W* dt_bias, const DeltaNetLayout& D) {
  std::vector<float> g(D.n_v), beta(D.n_v);
  gated_deltanet_prepare<Acc>(qkv, conv_state, g.data(), beta.data(), b, a, conv_w, A_log, dt_bias, D);
  for (int64_t h = 0; h < D.n_v; ++h) gated_deltanet_head<Acc>(o + h * D.dv, state, qkv, g.data(), beta.data(), h, D);
}

// Gated full attention's output gate, in place: att (T, n_heads * hd) *= sigmoid(gate), gate read
// from row t of `gates` at stride `gate_stride`.
template <typename Acc = float>
void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      att[t * n + i] = static_cast<float>(static_cast<Acc>(att[t * n + i]) *
                                          sigmoid(static_cast<Acc>(gates[t * gate_stride + i])));
    }
  }
}

}  // namespace tandem::engine::cpu
