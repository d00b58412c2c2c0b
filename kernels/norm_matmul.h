// The residual add + RMSNorm fused into the matrix product that consumes the normed vector (decode:
// the input norm into q/k/v, the post-attention norm into the router). Each block of the product
// recomputes the norm of its tokens' rows (a few KB from L2) instead of waiting for a separate
// one-block norm kernel: one launch and one memory round trip less per norm at batch 1. The same
// for one token in front of a quantized product (add_rmsnorm_matmul_quant).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/quant_weight.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// r = x_in + delta (delta may be null); xn = norm_w * r / sqrt(mean(r^2) + eps), per token row;
// y (T, out) = xn W^T with W (out, in) bf16. Also stores r to x_out and, when xn_out is not null,
// xn to xn_out. x_out must not alias x_in or delta (other blocks still read them: ping-pong the
// residual stream). in % 8 == 0; all pointers 16-byte aligned. The norm's weight is
// (w_offset + norm_w) as in add_rmsnorm (kernels/rmsnorm.h: 1 for zero-centred norms).
void add_rmsnorm_matmul(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                        const bf16_bits* norm_w, const bf16_bits* w, int64_t T, int64_t in, int64_t out, float eps,
                        cudaStream_t stream, float w_offset = 0.0f);

// One token's residual add + RMSNorm in front of a product (pointers to rows of the product's
// `cols` columns): r = x_in + delta (delta may be null), xn = (w_offset + norm_w) * r / sqrt(mean(r^2)
// + eps), as add_rmsnorm_matmul. r is stored to x_out and, when xn_out is not null, xn to xn_out;
// x_out must not alias x_in or delta.
struct RowNorm {
  float* x_out = nullptr;
  float* xn_out = nullptr;
  const float* x_in = nullptr;
  const float* delta = nullptr;
  const bf16_bits* norm_w = nullptr;
  float eps = 0.0f;
  float w_offset = 0.0f;
};

// y (1, W.rows) = xn W^T for one token and a quantized W (kFp8Block or kNvfp4, W.count == 1): the
// norm fused into matmul_quant's one-token kernels (kernels/quant_matmul.h; token_mma as there).
// Every block normalises the row into its shared memory itself. Returns false, launching nothing,
// where no fused kernel takes W (FP8's per-element scales, NVFP4 rows of cols % 32 == 16, rows wider
// than 4096 columns): the caller then runs add_rmsnorm and matmul_quant. Device pointers 16-byte
// aligned. ModelLoadOptions::cuda_quant_norm_fused; off by default until its H200 A/B.
bool add_rmsnorm_matmul_quant(float* y, const RowNorm& norm, const QuantMatrix& W, cudaStream_t stream,
                              bool token_mma = false);

namespace ref {
void add_rmsnorm_matmul_quant(float* y, const RowNorm& norm, const QuantMatrix& W);
void add_rmsnorm_matmul(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                        const bf16_bits* norm_w, const bf16_bits* w, int64_t T, int64_t in, int64_t out, float eps,
                        float w_offset = 0.0f);
}  // namespace ref

}  // namespace tandem::kernels
