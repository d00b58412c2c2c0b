// bf16-weight matrix products with float32 accumulation: y = x W^T, W as Hugging Face stores a
// Linear ([out, in], row-major). Decode is matrix-vector (T = batch of a few tokens) and bound by
// reading W once; one warp per output row streams W with 16-byte loads and applies each weight to
// up to 8 tokens at a time, so W is read from device memory once per 8 tokens.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// Tokens from which the products that have a prefill path (matmul_bf16, matmul_bf16_float_input,
// moe_gate_up / moe_down in moe.h; gemm.h UseGemmPath) take it, unless their caller passes its own
// `gemm_min_tokens`: the model passes ModelLoadOptions::cuda_gemm_min_tokens, whose default this is
// (tests pass 1 to put every multi-token product there, or a large number to keep it off).
constexpr int64_t kGemmMinTokens = 64;

// y (T, out) = x (T, in) W^T, W (out, in) bf16. in % 8 == 0; x, W 16-byte aligned. From
// gemm_min_tokens tokens on (outside a graph capture) through cuBLAS with x rounded to bf16 (gemm.h).
void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                 cudaStream_t stream, int64_t gemm_min_tokens = kGemmMinTokens);

// The same product with x kept in float32 at every T, for a product whose output makes a discrete
// choice: the MoE router, whose top-k flips at near-ties when its input is rounded to bf16 as
// matmul_bf16's prefill path does. From gemm_min_tokens (gemm.h UseGemmPath): the tensor cores through
// cuBLAS on x split into bf16 hi + lo (gemm.h gemm_bf16_split, ~2^-16 relative); otherwise (decode,
// graph capture) or without cuBLAS, matvec_bf16. in % 8 == 0; x, W 16-byte aligned.
void matmul_bf16_float_input(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                             cudaStream_t stream, int64_t gemm_min_tokens = kGemmMinTokens);

// The product always on the matvec kernels (x kept in float32 on the CUDA cores, W read once per 8
// tokens), at any T.
void matvec_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                 cudaStream_t stream);

namespace ref {
void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out);
}  // namespace ref

}  // namespace tandem::kernels
