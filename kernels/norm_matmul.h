// The residual add + RMSNorm fused into the matrix product that consumes the normed vector (decode:
// the input norm into q/k/v, the post-attention norm into the router). Each block of the product
// recomputes the norm of its tokens' rows (a few KB from L2) instead of waiting for a separate
// one-block norm kernel: one launch and one memory round trip less per norm at batch 1.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// r = x_in + delta (delta may be null); xn = norm_w * r / sqrt(mean(r^2) + eps), per token row;
// y (T, out) = xn W^T with W (out, in) bf16. Also stores r to x_out and, when xn_out is not null,
// xn to xn_out. x_out must not alias x_in or delta (other blocks still read them: ping-pong the
// residual stream). in % 8 == 0; all pointers 16-byte aligned. The norm's weight is
// (w_offset + norm_w) as in add_rmsnorm (kernels/rmsnorm.h: 1 for zero-centred norms).
// xn_split (one token only, in % 32 == 0; null: none): xn once more, in split order
// (kernels/split_order.h), for the NVFP4 experts' one-token gate/up.
void add_rmsnorm_matmul(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                        const bf16_bits* norm_w, const bf16_bits* w, int64_t T, int64_t in, int64_t out, float eps,
                        cudaStream_t stream, float w_offset = 0.0f, float* xn_split = nullptr);

namespace ref {
void add_rmsnorm_matmul(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                        const bf16_bits* norm_w, const bf16_bits* w, int64_t T, int64_t in, int64_t out, float eps,
                        float w_offset = 0.0f);
}  // namespace ref

}  // namespace tandem::kernels
