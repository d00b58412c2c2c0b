// Paged grouped-query attention over a bf16, float32 or fp8 (e4m3, kernels/fp8.h) KV cache. One kernel serves decode (one query token
// per sequence) and prefill (a causal chunk): every query token t of sequence s attends to the
// positions 0..pos[t] of s, whose K and V are already in the cache (qk_norm_rope.h stored the
// chunk's own tokens first), so causality is just "up to my position".
// Split-K (flash-decoding): each (token, head) is cut into partitions run as separate blocks, then
// merged with their softmax statistics, so a long context uses the whole GPU even at batch 1 (by the
// last partition block of each (token, head) to finish). The
// partition length follows from T, the heads and max_positions (about two blocks per SM), so a graph
// captured for a table width keeps one layout.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/fp8.h"
#include "kernels/stream.h"

namespace tandem::kernels {

struct AttentionShape {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;  // q head h reads kv head h / (n_heads / n_kv_heads)
  int64_t block_size = 0;                             // tokens per KV block
  int64_t max_blocks = 0;                             // columns of block_tables
  int64_t q_stride = 0;                               // floats between tokens' q rows
};

// Floats of scratch attention() needs for T tokens and partitions up to `max_positions`.
int64_t attention_scratch_floats(int64_t T, const AttentionShape& A, int64_t max_positions);
// uint32 counters paged_attention() needs for T tokens (one per token and head).
int64_t attention_counter_count(int64_t T, const AttentionShape& A);

// out (T, n_heads * head_dim) = softmax(q k^T * scale) v per head, over positions 0..pos[t] of
// sequence token_seq[t]. q (T, q_stride) float; k_cache, v_cache (num_slots, n_kv_heads, head_dim)
// bf16 with slot = block_tables[s * max_blocks + p / block_size] * block_size + p % block_size.
// `max_positions` bounds pos[t] + 1 for every t (it sets the number of partitions; a graph
// captured with a larger bound stays valid as positions grow up to it). head_dim in {32..256}.
// `counters` (attention_counter_count entries, required) must be 0 before the call and are 0 after
// it: the partition blocks count themselves there and the last one merges.
// The caches hold K / kv_scale.k and V / kv_scale.v (kernels/fp8.h; {1, 1} leaves them as they are):
// k's scale joins `scale`, v's multiplies the output.
// `one_token_per_sequence`: a decode step, each sequence bringing exactly one token (the one at
// pos[t]), so every cache position before pos[t] was stored by an earlier step; the blocks then
// load their first round of those before waiting for the previous kernel (programmatic dependent
// launch, kernels/launch.cuh). Wrong for any other step (it would read this step's own K/V early).
void paged_attention(float* out, float* scratch, uint32_t* counters, const float* q, const bf16_bits* k_cache,
                     const bf16_bits* v_cache, const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* pos, int64_t T, const AttentionShape& A, int64_t max_positions,
                     float scale, cudaStream_t stream, KvScale kv_scale = {}, bool one_token_per_sequence = false);
// The same over a float32 KV cache.
void paged_attention(float* out, float* scratch, uint32_t* counters, const float* q, const float* k_cache,
                     const float* v_cache, const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos,
                     int64_t T, const AttentionShape& A, int64_t max_positions, float scale, cudaStream_t stream,
                     KvScale kv_scale = {}, bool one_token_per_sequence = false);
// The same over an fp8 (e4m3) KV cache: a quarter of float32's bytes, decoded in registers.
void paged_attention(float* out, float* scratch, uint32_t* counters, const float* q, const fp8_e4m3* k_cache,
                     const fp8_e4m3* v_cache, const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* pos, int64_t T, const AttentionShape& A, int64_t max_positions, float scale,
                     cudaStream_t stream, KvScale kv_scale = {}, bool one_token_per_sequence = false);

namespace ref {
void paged_attention(float* out, const float* q, const bf16_bits* k_cache, const bf16_bits* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, float scale, KvScale kv_scale = {});
void paged_attention(float* out, const float* q, const float* k_cache, const float* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, float scale, KvScale kv_scale = {});
void paged_attention(float* out, const float* q, const fp8_e4m3* k_cache, const fp8_e4m3* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, float scale, KvScale kv_scale = {});
}  // namespace ref

}  // namespace tandem::kernels
