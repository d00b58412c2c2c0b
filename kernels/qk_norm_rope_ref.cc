#include "kernels/qk_norm_rope.h"

#include <vector>

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h) over bf16 weights, accumulating in double.
namespace tandem::kernels::ref {

namespace {

// The cpu op over the norm weights the kernel uses: the bf16 ones as stored, or (offset + w) in float.
template <typename KV>
void NormRopeStore(float* qkv, KV* k_cache, KV* v_cache, const bf16_bits* q_norm, const bf16_bits* k_norm,
                   const float* inv_freq, const int32_t* pos, const int32_t* slot, int64_t T, QkvLayout L, float eps,
                   float w_offset, KvScale kv_scale) {
  if (w_offset == 0.0f) {
    engine::cpu::qk_norm_rope_store_kv<double>(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps,
                                               kv_scale);
    return;
  }
  std::vector<float> qn(L.head_dim), kn(L.head_dim);
  for (int64_t i = 0; i < L.head_dim; ++i) {
    qn[i] = w_offset + Bf16ToFloat(q_norm[i]);
    kn[i] = w_offset + Bf16ToFloat(k_norm[i]);
  }
  engine::cpu::qk_norm_rope_store_kv<double>(qkv, k_cache, v_cache, qn.data(), kn.data(), inv_freq, pos, slot, T, L,
                                             eps, kv_scale);
}

}  // namespace

void qk_norm_rope_store_kv(float* qkv, bf16_bits* k_cache, bf16_bits* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos, const int32_t* slot,
                           int64_t T, QkvLayout L, float eps, float w_offset, KvScale kv_scale) {
  NormRopeStore(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps, w_offset, kv_scale);
}

void qk_norm_rope_store_kv(float* qkv, float* k_cache, float* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos, const int32_t* slot,
                           int64_t T, QkvLayout L, float eps, float w_offset, KvScale kv_scale) {
  NormRopeStore(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps, w_offset, kv_scale);
}

void qk_norm_rope_store_kv(float* qkv, fp8_e4m3* k_cache, fp8_e4m3* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos, const int32_t* slot,
                           int64_t T, QkvLayout L, float eps, float w_offset, KvScale kv_scale) {
  NormRopeStore(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps, w_offset, kv_scale);
}

}  // namespace tandem::kernels::ref
