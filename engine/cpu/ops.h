// The reference ops: the math of docs/model-notes.md written once, plain loops, output arguments
// first, shapes in comments. Two users instantiate them:
//   - the cpu backend (engine/cpu/layers.cc): float32 weights and KV, float32 accumulation;
//   - the CUDA kernels' CPU references (kernels/<op>_ref.cc): bf16 weights, double accumulation.
// So `Acc` is the accumulation type and W / KV the stored element types (float or bf16). Each op
// has the name of its CUDA kernel (kernels/<op>.h) and the same layouts (kernels::QkvLayout,
// kernels::AttentionShape, the experts' gate_up / down of kernels/moe.h). A null ThreadPool runs
// on the caller; with a pool, threads split independent outputs (each computed as without one).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/fp8.h"
#include "kernels/qk_norm_rope.h"

namespace tandem::engine::cpu {

using kernels::bf16_bits;
using kernels::fp8_e4m3;

// A stored element as float: float32 as is, bf16 and e4m3 widened (exactly; e4m3 unscaled).
inline float ToFloat(float v) { return v; }
inline float ToFloat(bf16_bits v) { return kernels::Bf16ToFloat(v); }
inline float ToFloat(fp8_e4m3 v) { return kernels::E4m3Decode(v.bits); }
// A value into a KV cache of float32 (as is), bf16 (rounded to nearest even) or e4m3 (rounded to
// nearest even, saturated to +-448; the caller has divided by the layer's scale).
inline void StoreKv(float v, float* dst) { *dst = v; }
inline void StoreKv(float v, bf16_bits* dst) { *dst = kernels::FloatToBf16(v); }
inline void StoreKv(float v, fp8_e4m3* dst) { dst->bits = kernels::FloatToE4m3(v); }

// Runs fn(begin, end) over [0, n): on the pool's threads, or on the caller when pool is null.
template <typename Fn>
void ParallelFor(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool == nullptr) {
    fn(int64_t{0}, n);
  } else {
    pool->ParallelFor(n, fn);
  }
}

// Dot product of two n-vectors in Acc. Four partial sums: lets the compiler vectorise without
// -ffast-math (the order of the sums is part of the cpu backend's numbers).
template <typename Acc, typename A, typename B>
Acc dot(const A* a, const B* b, int64_t n) {
  Acc s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<Acc>(ToFloat(a[i])) * static_cast<Acc>(ToFloat(b[i]));
    s1 += static_cast<Acc>(ToFloat(a[i + 1])) * static_cast<Acc>(ToFloat(b[i + 1]));
    s2 += static_cast<Acc>(ToFloat(a[i + 2])) * static_cast<Acc>(ToFloat(b[i + 2]));
    s3 += static_cast<Acc>(ToFloat(a[i + 3])) * static_cast<Acc>(ToFloat(b[i + 3]));
  }
  for (; i < n; ++i) s0 += static_cast<Acc>(ToFloat(a[i])) * static_cast<Acc>(ToFloat(b[i]));
  return (s0 + s1) + (s2 + s3);
}

// out = w * (x / sqrt(mean(x^2) + eps)) for each row; out (rows, n), x (rows, n), w (n). out may be x.
template <typename Acc = float, typename W>
void rmsnorm(float* out, const float* x, const W* w, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = out + r * n;
    const Acc ss = dot<Acc>(xr, xr, n);
    const float scale = static_cast<float>(Acc(1) / std::sqrt(ss / static_cast<Acc>(n) + static_cast<Acc>(eps)));
    for (int64_t i = 0; i < n; ++i) yr[i] = ToFloat(w[i]) * (xr[i] * scale);
  }
}

// residual (rows, n) += delta (when not null); then out = rmsnorm(residual) as above.
template <typename Acc = float, typename W>
void add_rmsnorm(float* out, float* residual, const float* delta, const W* w, int64_t rows, int64_t n, float eps) {
  if (delta != nullptr) {
    for (int64_t i = 0; i < rows * n; ++i) residual[i] += delta[i];
  }
  rmsnorm<Acc>(out, residual, w, rows, n, eps);
}

// y (rows, out_dim) = x (rows, in_dim) W^T, W (out_dim, in_dim) as Hugging Face stores a Linear.
// Threads split the output dimension, so each weight row is read once for all rows of x.
template <typename Acc = float, typename W>
void matmul(ThreadPool* pool, float* y, const float* x, const W* w, int64_t rows, int64_t in_dim, int64_t out_dim) {
  auto rows_of_w = [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const W* wo = w + o * in_dim;
      for (int64_t r = 0; r < rows; ++r) y[r * out_dim + o] = static_cast<float>(dot<Acc>(x + r * in_dim, wo, in_dim));
    }
  };
  // Waking threads costs microseconds: small products run on the caller.
  ParallelFor(rows * in_dim * out_dim < (1 << 16) ? nullptr : pool, out_dim, rows_of_w);
}

// out (T, H) = table[ids[t]], table (vocab, H).
template <typename W>
void embedding(float* out, const int32_t* ids, const W* table, int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const W* row = table + static_cast<int64_t>(ids[t]) * H;
    for (int64_t i = 0; i < H; ++i) out[t * H + i] = ToFloat(row[i]);
  }
}

// inv_freq[i] = theta^(-2i / rotary_dim) for i < rotary_dim / 2.
std::vector<float> rope_inv_freq(double theta, int64_t rotary_dim);

// Rotate-half (NeoX) RoPE in place at position `pos`: dims i and i + rotary_dim/2 of each head
// form a pair; x' = x cos + rotate_half(x) sin. Dims >= rotary_dim pass through.
// x (n_heads, head_dim), inv_freq (rotary_dim / 2).
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rotary_dim, int64_t pos, const float* inv_freq);

// qkv (T, L.row()) = [q | k | v] per token: q and k normed per head (q_norm, k_norm (head_dim)) and
// rotated at pos[t] in place; k / kv_scale.k and v / kv_scale.v stored into k_cache / v_cache
// (slots, n_kv_heads, head_dim) at slot[t] (scales of 1 leave them as they are).
template <typename Acc = float, typename W, typename KV>
void qk_norm_rope_store_kv(float* qkv, KV* k_cache, KV* v_cache, const W* q_norm, const W* k_norm,
                           const float* inv_freq, const int32_t* pos, const int32_t* slot, int64_t T,
                           const kernels::QkvLayout& L, float eps, kernels::KvScale kv_scale = {}) {
  const int64_t hd = L.head_dim, kvd = L.kv_dim();
  for (int64_t t = 0; t < T; ++t) {
    float* q = qkv + t * L.row();
    float* k = q + L.q_dim();
    const float* v = k + kvd;
    rmsnorm<Acc>(q, q, q_norm, L.n_heads, hd, eps);
    rmsnorm<Acc>(k, k, k_norm, L.n_kv_heads, hd, eps);
    rope(q, L.n_heads, hd, L.rotary_dim, pos[t], inv_freq);
    rope(k, L.n_kv_heads, hd, L.rotary_dim, pos[t], inv_freq);
    const int64_t at = static_cast<int64_t>(slot[t]) * kvd;
    for (int64_t i = 0; i < kvd; ++i) {
      StoreKv(k[i] / kv_scale.k, k_cache + at + i);
      StoreKv(v[i] / kv_scale.v, v_cache + at + i);
    }
  }
}

// In-place softmax over n values, with the max subtracted.
template <typename T>
void softmax(T* x, int64_t n) {
  const T mx = *std::max_element(x, x + n);
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

// The k largest of `probs` (n): indices in descending order of value (ties: lower index first).
template <typename T>
void topk(int32_t* idx, T* val, const T* probs, int64_t n, int64_t k) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  for (int64_t j = 0; j < k; ++j) {
    idx[j] = order[j];
    val[j] = probs[order[j]];
  }
}

// out (T, n_heads * head_dim) = softmax(q k^T * scale) v per head, over positions 0..pos[t] of
// sequence token_seq[t]: q (T, A.q_stride); K and V of position p at slot
// block_tables[seq * A.max_blocks + p / block_size] * block_size + p % block_size of the caches
// (slots, n_kv_heads, head_dim). Local q head h reads kv head h / (n_heads / n_kv_heads). The
// caches hold K / kv_scale.k and V / kv_scale.v: k's scale joins the softmax scale, v's scales
// the output (exact for scales of 1).
template <typename Acc = float, typename KV>
void paged_attention(ThreadPool* pool, float* out, const float* q, const KV* k_cache, const KV* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const kernels::AttentionShape& A, float scale, kernels::KvScale kv_scale = {}) {
  const Acc qk_scale = static_cast<Acc>(scale) * static_cast<Acc>(kv_scale.k);
  const int64_t hd = A.head_dim, group = A.n_heads / A.n_kv_heads, kv_dim = A.n_kv_heads * hd;
  ParallelFor(pool, T * A.n_heads, [&](int64_t i0, int64_t i1) {
    std::vector<Acc> s, acc(hd);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / A.n_heads, h = i % A.n_heads, kvh = h / group, n = pos[t] + 1;
      const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * A.max_blocks;
      auto at = [&](int64_t j) {
        return (static_cast<int64_t>(table[j / A.block_size]) * A.block_size + j % A.block_size) * kv_dim + kvh * hd;
      };
      const float* qh = q + t * A.q_stride + h * hd;
      s.resize(n);
      for (int64_t j = 0; j < n; ++j) s[j] = dot<Acc>(qh, k_cache + at(j), hd) * qk_scale;
      softmax(s.data(), n);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t j = 0; j < n; ++j) {
        const KV* vj = v_cache + at(j);
        for (int64_t d = 0; d < hd; ++d) acc[d] += s[j] * static_cast<Acc>(ToFloat(vj[d]));
      }
      float* oh = out + t * A.n_heads * hd + h * hd;
      for (int64_t d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc[d] * static_cast<Acc>(kv_scale.v));
    }
  });
}

// ids, weights (T, K) = the top k experts of softmax(logits (T, E)) per token, their
// probabilities renormalised to sum 1 when `renormalize` (norm_topk_prob).
template <typename Acc = float>
void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize) {
  std::vector<Acc> p(E), val(K);
  for (int64_t t = 0; t < T; ++t) {
    std::copy(logits + t * E, logits + (t + 1) * E, p.begin());
    softmax(p.data(), E);
    topk(ids + t * K, val.data(), p.data(), E, K);
    Acc sum = 0;
    for (Acc v : val) sum += v;
    for (int64_t k = 0; k < K; ++k) weights[t * K + k] = static_cast<float>(renormalize ? val[k] / sum : val[k]);
  }
}

// silu(x) = x * sigmoid(x)
template <typename T>
T silu(T x) {
  return x / (T(1) + std::exp(-x));
}

// out (rows, n) = silu(gate_up[:, :n]) * gate_up[:, n:]; gate_up (rows, 2n): the SwiGLU activation
// of a product over gate_proj and up_proj rows one after the other.
template <typename Acc = float>
void silu_mul(float* out, const float* gate_up, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * n;
    const float* u = g + n;
    for (int64_t i = 0; i < n; ++i) {
      out[r * n + i] = static_cast<float>(silu(static_cast<Acc>(g[i])) * static_cast<Acc>(u[i]));
    }
  }
}

// The routed pairs p = t*K + k (token t's k-th expert ids[p]) grouped by expert: each expert's
// product runs once over all its rows (its weights read once). Experts in ascending id order,
// pairs in ascending order within one.
struct ExpertRuns {
  std::vector<int64_t> pairs;                       // (T*K) sorted by (expert, pair)
  std::vector<std::pair<int32_t, int64_t>> starts;  // (expert, first index into pairs) per run
  ExpertRuns(const int32_t* ids, int64_t n);
  int64_t end(size_t run) const { return run + 1 < starts.size() ? starts[run + 1].second : int64_t(pairs.size()); }
};

// act (T*K, I) = silu(x_t W_gate[e]^T) * (x_t W_up[e]^T), e = ids[p], t = p / K; x (T, H);
// gate_up (E, 2I, H): rows [0, I) of expert e are gate_proj, rows [I, 2I) up_proj.
template <typename Acc = float, typename W>
void moe_gate_up(ThreadPool* pool, float* act, const float* x, const int32_t* ids, const W* gate_up, int64_t T,
                 int64_t K, int64_t H, int64_t I) {
  const ExpertRuns runs(ids, T * K);
  std::vector<float> xe, gu, ae;
  for (size_t r = 0; r < runs.starts.size(); ++r) {
    const auto [e, first] = runs.starts[r];
    const int64_t n = runs.end(r) - first;
    xe.resize(n * H), gu.resize(n * 2 * I), ae.resize(n * I);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = runs.pairs[first + i] / K;
      std::copy(x + t * H, x + (t + 1) * H, xe.data() + i * H);
    }
    matmul<Acc>(pool, gu.data(), xe.data(), gate_up + static_cast<int64_t>(e) * 2 * I * H, n, H, 2 * I);
    silu_mul<Acc>(ae.data(), gu.data(), n, I);
    for (int64_t i = 0; i < n; ++i) std::copy(ae.data() + i * I, ae.data() + (i + 1) * I, act + runs.pairs[first + i] * I);
  }
}

// out (T, H) = sum_k weights[t*K+k] * act[t*K+k] W_down[ids[t*K+k]]^T, down (E, H, I); the terms of
// a token added in ascending expert order (one expert at a time).
template <typename Acc = float, typename W>
void moe_down(ThreadPool* pool, float* out, const float* act, const int32_t* ids, const float* weights, const W* down,
              int64_t T, int64_t K, int64_t H, int64_t I) {
  const ExpertRuns runs(ids, T * K);
  std::vector<Acc> sum(T * H, Acc(0));
  std::vector<float> ae, ye;
  for (size_t r = 0; r < runs.starts.size(); ++r) {
    const auto [e, first] = runs.starts[r];
    const int64_t n = runs.end(r) - first;
    ae.resize(n * I), ye.resize(n * H);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = runs.pairs[first + i];
      std::copy(act + p * I, act + (p + 1) * I, ae.data() + i * I);
    }
    matmul<Acc>(pool, ye.data(), ae.data(), down + static_cast<int64_t>(e) * H * I, n, I, H);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = runs.pairs[first + i];
      Acc* o = sum.data() + (p / K) * H;
      const Acc w = weights[p];
      for (int64_t d = 0; d < H; ++d) o[d] += w * static_cast<Acc>(ye[i * H + d]);
    }
  }
  for (int64_t i = 0; i < T * H; ++i) out[i] = static_cast<float>(sum[i]);
}

}  // namespace tandem::engine::cpu
