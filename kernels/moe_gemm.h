// Prefill versions of moe_gate_up / moe_down (kernels/moe.h, same arguments and layouts): grouped
// GEMMs on tensor cores, the expert ids staying on the device.
//
//  1. The T*K (token, expert) pairs sorted by expert (count, exclusive scan, scatter: moe_pairs.cuh)
//     with the tile table: tile j = (expert, first sorted pair, pairs <= 64).
//  2. One tensor-core kernel over (output-row tile, pair tile) (moe_gemm_mma.cuh: mma.sync
//     m16n8k16 from ldmatrix, float accumulate): a block multiplies its pairs' activation rows
//     (rounded to bf16 once, into scratch slot 3) by 256 rows of its expert's weights, both
//     copied through a ring of cp.async stages. The grid has an upper bound of pair tiles,
//     ceil(T*K/64) + min(T*K, kMaxExperts); the blocks past the table's end exit at once. (The
//     split products below keep the WMMA kernel, which splits the float32 rows itself.)
//       gate_up: 128 gate rows i and the 128 matching up rows I+i -> act[p][i] = silu(gate) * up.
//       down:    256 rows h -> part[p][h] = weights[p] * (act[p] W_down[e]^T)[h]   (scratch)
//  3. down only: out[t] = sum_k part[t*K+k] in k order (deterministic; no float atomics).
//
// Scratch (kernels/gemm.h StreamScratch): slot 1 the sort (~4 * (2 T*K + 2 kMaxExperts) bytes),
// slot 2 the down partials (4 T*K*H bytes: 128 MiB at 2048 tokens of Qwen3-30B-A3B), slot 3 the
// activations rounded to bf16 (2 max(T*H, T*K*I) bytes), slot 4 moe_grouped's bf16 act (2 T*K*I).
#pragma once

#include <cstdint>

#include <driver_types.h>  // cudaError_t: these entry points are only called from CUDA code

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// Expert ids must lie in [0, kMaxExperts) (the histogram lives in shared memory; the launchers do
// not know E). An id outside traps the kernel.
constexpr int64_t kMaxExperts = 1024;

// True when the grouped path handles these sizes: H and I multiples of 64, pointers 16-byte aligned.
bool MoeGroupedSupported(const float* x, const bf16_bits* w, int64_t H, int64_t I);

// Prepares the scratch both launches take for T tokens (kernels/gemm.h ReserveGemm says why): the
// CUDA error, cudaErrorMemoryAllocation when the device is full, instead of an abort in the launch.
// cudaSuccess, reserving nothing, for sizes the grouped path does not take.
cudaError_t ReserveMoeGrouped(cudaStream_t stream, int64_t T, int64_t K, int64_t H, int64_t I);

// As moe_gate_up / moe_down. Return false, launching nothing, when !MoeGroupedSupported.
// With `gate_up_lo` / `down_lo` (the weights' bf16 remainders, same layout: kernels/quant_matmul.h
// dequantize_bf16 with lo) the products keep float32-grade accuracy: the gathered activations are
// split into bf16 hi + lo too, and each tile adds hi W^T + lo W^T + hi W_lo^T (three times the
// MMAs, twice the weight bytes, 60 KB of shared memory a block): the MoE half of the split
// quantized prefill (ModelLoadOptions::cuda_quant_prefill_split).
bool moe_gate_up_grouped(float* act, const float* x, const int32_t* ids, const bf16_bits* gate_up, int64_t T,
                         int64_t K, int64_t H, int64_t I, cudaStream_t stream, const bf16_bits* gate_up_lo = nullptr);
bool moe_down_grouped(float* out, const float* act, const int32_t* ids, const float* weights,
                      const bf16_bits* down, int64_t T, int64_t K, int64_t H, int64_t I, cudaStream_t stream,
                      const bf16_bits* down_lo = nullptr);

// moe_gate_up_grouped then moe_down_grouped (no split) in one call, the same `out` bit for bit:
// the pairs sorted once, and the activations passed from gate_up to down as bf16 in scratch slot 4
// (down rounds them to bf16 anyway) instead of a float32 act written, read and rounded. False,
// launching nothing, where either of the two would refuse the sizes.
bool moe_grouped(float* out, const float* x, const int32_t* ids, const float* weights, const bf16_bits* gate_up,
                 const bf16_bits* down, int64_t T, int64_t K, int64_t H, int64_t I, cudaStream_t stream);

}  // namespace tandem::kernels
