// Per-head RMSNorm of q and k, rotate-half RoPE at each token's position, and the store of k and v
// into the paged KV cache: everything between the fused qkv projection and attention.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/fp8.h"
#include "kernels/stream.h"

// Callable from kernels too (the struct is passed by value to the kernel).
#ifdef __CUDACC__
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

namespace tandem::kernels {

struct QkvLayout {
  int64_t n_heads = 0;     // q heads (this rank)
  int64_t n_kv_heads = 0;  // kv heads (this rank)
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // dims i and i + rotary_dim/2 form a pair; dims >= rotary_dim pass through
  // Gated attention (the hybrid models): each token's row ends with the output gate's q_dim values,
  // produced by the same product as q, k and v and left alone by qk_norm_rope_store_kv; else 0.
  int64_t gate_dim = 0;
  TANDEM_HOST_DEVICE int64_t q_dim() const { return n_heads * head_dim; }
  TANDEM_HOST_DEVICE int64_t kv_dim() const { return n_kv_heads * head_dim; }
  TANDEM_HOST_DEVICE int64_t gate_offset() const { return q_dim() + 2 * kv_dim(); }
  TANDEM_HOST_DEVICE int64_t row() const { return gate_offset() + gate_dim; }  // [q | k | v (| gate)] per token
};

// qkv (T, L.row()) float: q and k normed and rotated in place; k and v also stored (bf16, float32 or
// fp8 e4m3) into k_cache / v_cache (num_slots, n_kv_heads, head_dim) at slot[t] (= block * block_size
// + offset), divided by kv_scale.k and kv_scale.v (kernels/fp8.h; e4m3 rounds to nearest even and
// saturates to +-448, as __nv_cvt_float_to_fp8 with __NV_SATFINITE does).
// q_norm, k_norm (head_dim) bf16, used as (w_offset + w) (1: the hybrid models' zero-centred
// norms, kernels/rmsnorm.h); inv_freq (rotary_dim / 2); pos, slot (T). head_dim <= 1024.
// Only qkv may come from the previous kernel of the stream: the norms, inv_freq, pos and slot are
// read before the kernel waits for it (kernels/launch.cuh; the engine's step metadata is copied
// before the step's first kernel).
void qk_norm_rope_store_kv(float* qkv, bf16_bits* k_cache, bf16_bits* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, cudaStream_t stream,
                           float w_offset = 0.0f, KvScale kv_scale = {});
// The same with a float32 KV cache.
void qk_norm_rope_store_kv(float* qkv, float* k_cache, float* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, cudaStream_t stream,
                           float w_offset = 0.0f, KvScale kv_scale = {});
// The same with an fp8 (e4m3) KV cache.
void qk_norm_rope_store_kv(float* qkv, fp8_e4m3* k_cache, fp8_e4m3* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, cudaStream_t stream,
                           float w_offset = 0.0f, KvScale kv_scale = {});

namespace ref {
void qk_norm_rope_store_kv(float* qkv, bf16_bits* k_cache, bf16_bits* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, float w_offset = 0.0f,
                           KvScale kv_scale = {});
void qk_norm_rope_store_kv(float* qkv, float* k_cache, float* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, float w_offset = 0.0f,
                           KvScale kv_scale = {});
void qk_norm_rope_store_kv(float* qkv, fp8_e4m3* k_cache, fp8_e4m3* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, float w_offset = 0.0f,
                           KvScale kv_scale = {});
}  // namespace ref

}  // namespace tandem::kernels
