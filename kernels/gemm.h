// Prefill matrix products through cuBLAS: y = x W^T with x rounded to bf16, bf16 W, float32
// accumulation and output (CUBLAS_COMPUTE_32F). matmul_bf16 takes this path from its caller's
// threshold on (kGemmMinTokens, kernels/matmul.h, unless the model's options say otherwise); decode
// (fewer tokens) keeps the matvec kernels, which read W once and keep x in float32.
//
// cuBLAS is loaded with dlopen on first use (libcublas.so.13, then .12, then libcublas.so), so
// that binaries start on a machine without it: there the prefill paths report false and the
// callers fall back to their own kernels (one line on stderr says so).
//
// Per (device, stream) state lives for the process: a cuBLAS handle and grow-only scratch buffers
// (work on one stream is ordered, so its scratch is never shared by two kernels in flight).
#pragma once

#include <cstddef>
#include <cstdint>

#include <driver_types.h>  // cudaError_t: these entry points are only called from CUDA code

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// T >= min_tokens (the caller's threshold: kGemmMinTokens, or the model's
// ModelLoadOptions::cuda_gemm_min_tokens; >= 1) and `stream` is not being captured into a graph
// (the prefill paths call cudaMalloc and cuBLAS, which a captured decode step must not).
bool UseGemmPath(int64_t T, int64_t min_tokens, cudaStream_t stream);

// y (T, out) = bf16(x) (T, in) W^T, W (out, in) row-major bf16. Returns false, launching nothing,
// when cuBLAS cannot be loaded. x, w 16-byte aligned.
bool gemm_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
               cudaStream_t stream);

// y (T, out) = x (T, in) W^T with x kept to float32 precision: x = hi + lo, both bf16 (hi = bf16(x),
// lo = bf16(x - hi), so |x - hi - lo| <= 2^-16 |x|), and y = hi W^T + lo W^T, each product exact
// in the tensor cores and summed in float32. For a product whose output makes a discrete choice
// (the MoE router's top-k, which bf16(x) flips at near-ties: kernels/matmul.h
// matmul_bf16_float_input). Returns false, launching nothing, when cuBLAS cannot be loaded.
// x 16-byte aligned.
//
// Why two cuBLAS products over a split copy of x (the router of Qwen3-30B-A3B at a 2048-token
// prefill: T = 2048, in = 2048, out = 128; 16 MB of float32 x, 0.5 MB of W):
// - the matrix-vector kernels (matvec_bf16, what prefill ran before) keep x in float32 on the CUDA
//   cores: one row of W per warp and 8 tokens per pass, so W is re-read once per 8 tokens (128 MB
//   through L2) and each warp reads its 8 tokens' x for one row (2 GB through L1, 256 MB from L2),
//   for 0.54 G FMAs. Moving the router onto them from gemm_bf16 cost 8.5 ms of a 2048-token
//   prefill (48 layers: ~180 us a layer more; docs/bench/hybrid-decode-h200.md, "before and after
//   issue 14").
// - here: one pass splits x (reads 16 MB, writes hi and lo, 16 MB), then two GEMMs read hi and lo
//   (16 MB, mostly still in the 50 MB L2), W twice (1 MB) and y three times (write, read for
//   beta = 1, write: 3 MB): ~50 MB, ~12 us at the H200's ~4.2 TB/s; 2 x 2 T in out = 2.1 GFLOP on
//   the tensor cores, a few us beside the bytes. That is 1.5x what gemm_bf16 moves for the same
//   product (x read, bf16(x) written and read: 32 MB), for float32 accuracy.
// - the decode-batch tensor-core kernel (matmul_batched, kernels/mma_rows.cuh), which splits x
//   in registers and so writes no copy, gives a block 16 rows of W and 32 tokens: every token row
//   is read (and split) once per 16 rows, 8 times at out = 128 (128 MB through L2, 32 times for
//   a 512-expert router), where a cuBLAS tile covers 64-256 rows.
// - one GEMM over k = 2 in ([hi | lo] against [W | W]) would move the same x bytes and need W
//   duplicated per call (1 MB written) to save y's extra 2 MB and one launch: no cheaper, and a
//   second copy of W to manage. So two products, the second accumulating (beta = 1).
//
// With `w_lo` (same shape as w) the weight is a float32 one split the same way, W = w + w_lo
// (kernels/quant_matmul.h dequantize_bf16 with lo: the quantized weights' split prefill,
// ModelLoadOptions::cuda_quant_prefill_split), and y = hi w^T + lo w^T + hi w_lo^T: a third product,
// also accumulated; the lo w_lo^T term (< 2^-16 of the whole) is left out.
bool gemm_bf16_split(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                     cudaStream_t stream, const bf16_bits* w_lo = nullptr);

// Prepares what gemm_bf16 allocates on `stream` for products of up to T tokens and `max_in` inputs
// (the cuBLAS handle, slot 0 of the scratch), so that those launches allocate nothing; with
// `max_split_in` > 0 also gemm_bf16_split's products of up to that many inputs (hi and lo take
// twice the bytes of a bf16 x). A model calls it before a prefill step: out of device memory then
// comes back as cudaErrorMemoryAllocation, which the step reports, instead of aborting inside the
// launch. cudaSuccess, doing nothing, when cuBLAS cannot be loaded.
cudaError_t ReserveGemm(cudaStream_t stream, int64_t T, int64_t max_in, int64_t max_split_in = 0);

// At least `bytes` of device memory on the current device, private to (`stream`, `slot`), valid
// until the next call with the same key (it only grows; growing waits for `stream` first).
// Slots: kernels/gemm.cu uses 0, kernels/moe_gemm.cu 1 to 4. Growing here aborts on an error:
// callers that must survive out of memory reserve first (ReserveGemm, ReserveMoeGrouped).
void* StreamScratch(cudaStream_t stream, int slot, size_t bytes);
// Grows (`stream`, `slot`) as StreamScratch would, returning the error (the slot left empty on
// one) instead of aborting.
cudaError_t ReserveStreamScratch(cudaStream_t stream, int slot, size_t bytes);

// Rounds n floats to bf16 (round to nearest even) on `stream`.
void floats_to_bf16(bf16_bits* dst, const float* src, int64_t n, cudaStream_t stream);

// Splits n floats into bf16 hi = bf16(src) and lo = bf16(src - hi) (round to nearest even) on
// `stream`. src 16-byte aligned; hi and lo 8-byte aligned.
void floats_to_bf16_split(bf16_bits* hi, bf16_bits* lo, const float* src, int64_t n, cudaStream_t stream);

}  // namespace tandem::kernels
