#include "kernels/qk_norm_rope.h"

#include <cmath>
#include <vector>

namespace tandem::kernels::ref {

namespace {

void NormRopeHead(float* x, const bf16_bits* w, const float* inv_freq, int64_t pos, const QkvLayout& L,
                  float eps) {
  const int64_t hd = L.head_dim, half = L.rotary_dim / 2;
  double ss = 0;
  for (int64_t i = 0; i < hd; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / hd + eps));
  for (int64_t i = 0; i < hd; ++i) x[i] = Bf16ToFloat(w[i]) * (x[i] * scale);
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    const float c = std::cos(angle), s = std::sin(angle);
    const float a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

}  // namespace

inline bf16_bits ToKv(float v, bf16_bits*) { return FloatToBf16(v); }
inline float ToKv(float v, float*) { return v; }

template <typename KV>
void StoreKv(float* qkv, KV* k_cache, KV* v_cache, const bf16_bits* q_norm, const bf16_bits* k_norm,
             const float* inv_freq, const int32_t* pos, const int32_t* slot, int64_t T, QkvLayout L, float eps) {
  const int64_t hd = L.head_dim;
  for (int64_t t = 0; t < T; ++t) {
    float* row = qkv + t * L.row();
    for (int64_t h = 0; h < L.n_heads; ++h) NormRopeHead(row + h * hd, q_norm, inv_freq, pos[t], L, eps);
    float* k = row + L.q_dim();
    const float* v = k + L.kv_dim();
    for (int64_t h = 0; h < L.n_kv_heads; ++h) NormRopeHead(k + h * hd, k_norm, inv_freq, pos[t], L, eps);
    for (int64_t i = 0; i < L.kv_dim(); ++i) {
      k_cache[static_cast<int64_t>(slot[t]) * L.kv_dim() + i] = ToKv(k[i], k_cache);
      v_cache[static_cast<int64_t>(slot[t]) * L.kv_dim() + i] = ToKv(v[i], v_cache);
    }
  }
}

void qk_norm_rope_store_kv(float* qkv, bf16_bits* k_cache, bf16_bits* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps) {
  StoreKv(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps);
}

void qk_norm_rope_store_kv(float* qkv, float* k_cache, float* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps) {
  StoreKv(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps);
}

}  // namespace tandem::kernels::ref
