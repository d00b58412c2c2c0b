#include "kernels/attention.h"

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h), accumulating in double.
namespace tandem::kernels::ref {

namespace {

template <typename KV>
void Attention(float* out, const float* q, const KV* k_cache, const KV* v_cache, const int32_t* block_tables,
               const int32_t* token_seq, const int32_t* pos, int64_t T, const AttentionShape& A, float scale,
               KvScale kv_scale) {
  engine::cpu::paged_attention<double>(nullptr, out, q, k_cache, v_cache, block_tables, token_seq, pos, T, A, scale,
                                       kv_scale);
}

}  // namespace

void paged_attention(float* out, const float* q, const bf16_bits* k_cache, const bf16_bits* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, float scale, KvScale kv_scale) {
  Attention(out, q, k_cache, v_cache, block_tables, token_seq, pos, T, A, scale, kv_scale);
}

void paged_attention(float* out, const float* q, const float* k_cache, const float* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, float scale, KvScale kv_scale) {
  Attention(out, q, k_cache, v_cache, block_tables, token_seq, pos, T, A, scale, kv_scale);
}

void paged_attention(float* out, const float* q, const fp8_e4m3* k_cache, const fp8_e4m3* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, float scale, KvScale kv_scale) {
  Attention(out, q, k_cache, v_cache, block_tables, token_seq, pos, T, A, scale, kv_scale);
}

}  // namespace tandem::kernels::ref
