// y = x W^T for decode batches on the tensor cores: W is read once per 32 tokens, where the
// matrix-vector kernels (matmul.h) read it once per 8 and multiply on CUDA cores. A warp holds 16
// or 32 rows of W a k step at a time and multiplies them by the tokens in groups of 8
// (kernels/mma_rows.cuh: bf16 mma.sync, sm_80 on, the GB10 included); the float32 inputs enter as
// bf16 hi + lo, so results match the matrix-vector kernels to ~1e-5 relative.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// From this many tokens matmul_bf16 takes matmul_batched (below it the matrix-vector kernels
// already read W once and a tensor-core pass would leave most of its columns empty).
constexpr int64_t kMatmulBatchedMinTokens = 8;

// Whether matmul_batched takes these sizes: in % 32 == 0, out % 16 == 0.
bool MatmulBatchedSupported(int64_t in, int64_t out);

// Whether a product of `out` rows at T tokens takes two 16-row groups a block (else one): the rule
// of matmul_batched, shared by the quantized products on the same kernel design.
bool MatmulBatchedTwoGroups(int64_t T, int64_t out);

// y (T, out) = x (T, in) W^T, W (out, in) bf16; x and W 16-byte aligned. Any T >= 1 (graphs may
// capture it: no scratch, no cuBLAS).
void matmul_batched(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                    cudaStream_t stream);

}  // namespace tandem::kernels
