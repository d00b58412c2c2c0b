// Routed experts for decode batches (a few to a few dozen tokens): each chosen expert's weights are
// read once per step and multiplied by all of its tokens on tensor cores, where moe_gate_up /
// moe_down (moe.h) read an expert once per token that chose it.
//
//  1. The pairs are sorted by expert into tiles of up to 32 pairs (moe_pairs.cuh); the model's
//     expert count bounds the tile table, so the grids hold only blocks its experts can fill.
//  2. gate_up: a block streams 64 gate rows and the 64 matching up rows of the tile's expert, and
//     the same k of the tile's token rows, through a ring of shared-memory stages (cp.async, three
//     64-wide k chunks in flight: 48 KB a block, which the registers of a load-then-multiply loop
//     cannot hold); each warp multiplies its 16 gate and 16 up rows by the tile's tokens in groups
//     of 8 (kernels/mma_rows.cuh: bf16 mma.sync, sm_80 on, the GB10 included; the float32
//     activations enter as bf16 hi + lo, so a batch gives a sequence the logits it gets alone).
//     act[p] = silu(gate) * up.
//  3. down: the same with 128 rows of the expert's down matrix; part[p] = weights[p] * row.
//  4. out[t] = sum over k in order of part[t*K + k]: deterministic, no float atomics.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/quant_weight.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// The smallest decode batch the engine sends here (moe_batched, or moe_batched_quant below), by the
// experts' format: below it the per-token kernels (moe.h, quant_moe.h), which start loading while
// the router finishes and need no sort, are faster on the H200.
//  - bf16 (same-run A/Bs in docs/bench/decode-h200.md): batch 8 11.1 ms a step with them against
//    11.5 with this kernel; session 21, threshold 9 against 16: batch 9 12.06-12.15 against
//    12.05-12.22 ms, a tie, batch 10 12.44-12.56 against 13.06-13.26, 12 14.28-14.43 against
//    15.05-15.24, 14 15.02-15.16 against 17.06-17.17.
//  - FP8 and NVFP4: their tiles are widened in registers, a chain of instructions ahead of each mma,
//    so the kernel does not reach the bytes' bound (about 1.9 TB/s for FP8 and 1.2 TB/s for NVFP4 at
//    32 tokens), while the per-token kernels read few bytes per token. One Qwen3-30B-A3B MoE layer on
//    the H200 (quant_moe_batched_cuda_test) took FP8 per-token 181 / 349 us at 16 / 32 tokens
//    against 216 / 272 batched, NVFP4 per-token 100 / 204 at 8 / 10 against 114 / 155. Decode
//    steps (session 24, docs/bench/quant-decode-h200.md): FP8 batch 16 14.5 ms per-token against
//    15.6 batched, batch 20 17.6 against 16.9-17.2, batch 24 20.2 against 18.5-19.1.
constexpr int64_t MoeBatchedMinTokens(WeightFormat format) { return format == WeightFormat::kFp8Block ? 20 : 10; }

// The largest step the engine sends here (larger decode batches are rare; prefill takes moe_gemm.h).
constexpr int64_t kMoeBatchedMaxTokens = 256;

// Whether moe_batched takes these sizes (H and I multiples of 32) on the current device (its blocks
// need ~98 KB of shared memory: the H200 and the GB10 have it).
bool MoeBatchedSupported(int64_t H, int64_t I);

// Device bytes of the scratch moe_batched needs for T tokens of K experts each.
size_t MoeBatchedScratchBytes(int64_t T, int64_t K, int64_t H, int64_t I);

// act (T*K, I) as moe_gate_up writes it, then
// out (T, H) = sum_k weights[t*K+k] * moe_down(silu(x W_gate^T) * (x W_up^T)) of expert ids[t*K+k],
// as ref::moe_gate_up followed by ref::moe_down. gate_up (E, 2I, H), down (E, H, I) as in moe.h.
// `scratch`: MoeBatchedScratchBytes bytes, 16-byte aligned, owned by the caller (so a captured
// graph keeps a valid address). E experts (the shared one included where it runs as one more):
// ids in [0, E), E <= kMaxExperts (moe_gemm.h); an id outside traps.
void moe_batched(float* out, float* act, const float* x, const int32_t* ids, const float* weights, const bf16_bits* gate_up,
                 const bf16_bits* down, int64_t T, int64_t K, int64_t H, int64_t I, int64_t E, void* scratch,
                 cudaStream_t stream);

// moe_batched over quantized expert stacks (quant_weight.h: FP8 block-scaled or NVFP4, gate_up
// (E, 2I, H) and down (E, H, I) in one format, E = gate_up.count experts), each chosen expert read
// once a step in its own format and widened to bf16 in registers (exactly) for the same mma; the
// same outputs as ref::moe_gate_up_quant then ref::moe_down_quant (quant_moe.h), with the scratch of
// MoeBatchedScratchBytes. Whether it takes the layouts on the current device: FP8 with block_in a
// power of two >= 32 and col_phase % 32 == 0 (Qwen's -FP8 checkpoints and their TP 2, 4 and 8
// shards);
// NVFP4 with H and I multiples of 64 (Qwen3-30B-A3B's experts up to TP 4). Elsewhere the per-token
// kernels of quant_moe.h.
bool MoeBatchedQuantSupported(const QuantMatrix& gate_up, const QuantMatrix& down, int64_t H, int64_t I);
void moe_batched_quant(float* out, float* act, const float* x, const int32_t* ids, const float* weights,
                       const QuantMatrix& gate_up, const QuantMatrix& down, int64_t T, int64_t K, int64_t H, int64_t I,
                       void* scratch, cudaStream_t stream);

}  // namespace tandem::kernels
