// Prefill matrix products through cuBLAS: y = x W^T with x rounded to bf16, bf16 W, float32
// accumulation and output (CUBLAS_COMPUTE_32F). matmul_bf16 takes this path from
// GemmMinTokens() tokens on; decode (fewer tokens) keeps the matvec kernels, which read W once and
// keep x in float32.
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

// Tokens from which the prefill paths are taken: 64, or env TANDEM_GEMM_MIN_TOKENS (>= 1; read once).
int64_t GemmMinTokens();

// T >= GemmMinTokens() and `stream` is not being captured into a graph (the prefill paths call
// cudaMalloc and cuBLAS, which a captured decode step must not).
bool UseGemmPath(int64_t T, cudaStream_t stream);

// y (T, out) = bf16(x) (T, in) W^T, W (out, in) row-major bf16. Returns false, launching nothing,
// when cuBLAS cannot be loaded. x, w 16-byte aligned.
bool gemm_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
               cudaStream_t stream);

// Prepares what gemm_bf16 allocates on `stream` for products of up to T tokens and `max_in` inputs
// (the cuBLAS handle, slot 0 of the scratch), so that those launches allocate nothing. A model
// calls it before a prefill step: out of device memory then comes back as
// cudaErrorMemoryAllocation, which the step reports, instead of aborting inside the launch.
// cudaSuccess, doing nothing, when cuBLAS cannot be loaded.
cudaError_t ReserveGemm(cudaStream_t stream, int64_t T, int64_t max_in);

// At least `bytes` of device memory on the current device, private to (`stream`, `slot`), valid
// until the next call with the same key (it only grows; growing waits for `stream` first).
// Slots: kernels/gemm.cu uses 0, kernels/moe_gemm.cu 1 and 2. Growing here aborts on an error:
// callers that must survive out of memory reserve first (ReserveGemm, ReserveMoeGrouped).
void* StreamScratch(cudaStream_t stream, int slot, size_t bytes);
// Grows (`stream`, `slot`) as StreamScratch would, returning the error (the slot left empty on
// one) instead of aborting.
cudaError_t ReserveStreamScratch(cudaStream_t stream, int slot, size_t bytes);

// Rounds n floats to bf16 (round to nearest even) on `stream`.
void floats_to_bf16(bf16_bits* dst, const float* src, int64_t n, cudaStream_t stream);

}  // namespace tandem::kernels
