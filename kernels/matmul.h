// bf16-weight matrix products with float32 accumulation: y = x W^T, W as Hugging Face stores a
// Linear ([out, in], row-major). Decode is matrix-vector (T = batch of a few tokens) and bound by
// reading W once; one warp per output row streams W with 16-byte loads and applies each weight to
// up to 8 tokens at a time, so W is read from device memory once per 8 tokens.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// y (T, out) = x (T, in) W^T, W (out, in) bf16. in % 8 == 0; x, W 16-byte aligned.
void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                 cudaStream_t stream);

// The same product always on the matvec kernels (x kept in float32, W read once per 8 tokens), at
// any T: for a product whose output makes a discrete choice, the MoE router, whose top-k flips at
// near-ties when its input is rounded to bf16 as the prefill GEMM path does.
void matvec_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                 cudaStream_t stream);

namespace ref {
void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out);
}  // namespace ref

}  // namespace tandem::kernels
