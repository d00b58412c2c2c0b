#include "kernels/qk_norm_rope.h"

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h) over bf16 weights, accumulating in double.
namespace tandem::kernels::ref {

void qk_norm_rope_store_kv(float* qkv, bf16_bits* k_cache, bf16_bits* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos, const int32_t* slot,
                           int64_t T, QkvLayout L, float eps) {
  engine::cpu::qk_norm_rope_store_kv<double>(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps);
}

void qk_norm_rope_store_kv(float* qkv, float* k_cache, float* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos, const int32_t* slot,
                           int64_t T, QkvLayout L, float eps) {
  engine::cpu::qk_norm_rope_store_kv<double>(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps);
}

}  // namespace tandem::kernels::ref
