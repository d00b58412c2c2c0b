// Tiled ("flash") causal attention for prefill steps on the tensor cores: the same function as
// paged_attention (kernels/attention.h) over the same paged bf16, float32 or fp8 KV cache, for steps
// whose sequences each bring a chunk of consecutive positions.
//
// paged_attention gives every (token, head) its own blocks, so each of them reads the sequence's K
// and V again and computes on CUDA cores; at 2048 prompt tokens that is most of a prefill step. Here
// one block takes a tile of consecutive tokens of one sequence together with all the q heads that
// share a kv head (the GQA group, packed as the rows of one matrix: 128 rows = 128 / group tokens;
// 64 rows at head_dim 256), walks the sequence's K/V in tiles of 64 positions (32 at head_dim 256)
// through the block table up to the tile's last position, and computes S = Q K^T and O += P V with
// bf16 mma.sync (fp32 accumulation) and an online softmax in fp32. K and V tiles are staged once per block for the whole group and double-buffered
// (cp.async for a bf16 cache; float32 and fp8 are converted to bf16 while staged). Plain sm_80
// instructions: the same code runs on the H200 (sm_90) and the DGX Spark's GB10 (sm_121).
//
// Rounding: Q (with the softmax scale folded in), K and V of a float32 cache, and the softmax weights
// P are bf16 operands of the products, so results differ from paged_attention's float32 arithmetic
// by about 1e-3 relative (bf16 operands; fp8 values convert to bf16 exactly).
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/fp8.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// Whether attention_prefill takes this shape: head_dim 32, 64, 128 or 256, a GQA group
// (n_heads / n_kv_heads) that divides the block's rows (128; 64 at head_dim 256), and q rows that
// are float4-aligned (q_stride % 4 == 0). Otherwise use paged_attention.
bool attention_prefill_supported(const AttentionShape& A);

// out (T, n_heads * head_dim) = softmax(q k^T * scale) v per head, causal, as paged_attention
// computes it (kv_scale as there), for a step of S sequences: sequence s owns the tokens
// [seq_starts[s], seq_starts[s + 1]) (seq_starts[S] == T) at consecutive positions pos[t] (the
// first one may be past 0: a chunk after cached tokens), and its block table is row s of
// block_tables. Every position 0..pos[t] must already be in the cache. q (T, q_stride) float,
// 16-byte aligned. Sequences of one token are fine (decode-style rows of a mixed step) but use
// one token of a block's 128 / group. No scratch. Graphs capture it (the engine's decode batches:
// engine/cuda/layers.cc): the launch also sets the kernel's shared-memory limit (69,632 bytes at
// head_dim 128, 67,584 at 256), a driver call that is not a stream operation.
// Sequences whose tokens all lie below token `done_below` are left alone: the caller computes them
// (the engine gives the short sequences at the head of a mixed step, its decodes, to paged_attention,
// which splits a long context across blocks where this kernel would walk it in one).
void attention_prefill(float* out, const float* q, const bf16_bits* k_cache, const bf16_bits* v_cache,
                       const int32_t* block_tables, const int32_t* pos, const int32_t* seq_starts, int64_t T,
                       int64_t S, const AttentionShape& A, float scale, cudaStream_t stream, KvScale kv_scale = {},
                       int64_t done_below = 0);
void attention_prefill(float* out, const float* q, const float* k_cache, const float* v_cache,
                       const int32_t* block_tables, const int32_t* pos, const int32_t* seq_starts, int64_t T,
                       int64_t S, const AttentionShape& A, float scale, cudaStream_t stream, KvScale kv_scale = {},
                       int64_t done_below = 0);
void attention_prefill(float* out, const float* q, const fp8_e4m3* k_cache, const fp8_e4m3* v_cache,
                       const int32_t* block_tables, const int32_t* pos, const int32_t* seq_starts, int64_t T,
                       int64_t S, const AttentionShape& A, float scale, cudaStream_t stream, KvScale kv_scale = {},
                       int64_t done_below = 0);

}  // namespace tandem::kernels
