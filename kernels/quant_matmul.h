// Products with quantized weights (kernels/quant_weight.h: block-scaled FP8, NVFP4), read in their
// stored format and dequantized in registers, float32 accumulation. Decode is bound by the weight
// bytes it reads: FP8 halves them against bf16, NVFP4 (4.5 bits a weight with its scales) cuts them
// to about 0.28. Prefill dequantizes a matrix to bf16 once and runs the bf16 GEMM (kernels/gemm.h).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/quant_weight.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// y (T, W.rows) = x (T, W.cols) W^T for one matrix (W.count == 1) in kFp8Block or kNvfp4, x float32
// 16-byte aligned, W.cols % 16 == 0. Any T; meant for decode sizes (the weights are read once per
// tile of up to 8 tokens).
void matmul_quant(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);

// dst (W.count, W.rows, W.cols) bf16 = W dequantized, rounded to nearest even. With `lo` (same
// shape, 16-byte aligned) also the rounding's remainder, lo = bf16(W - dst): dst + lo holds the
// float32 weight to |W - dst - lo| <= 2^-18 |W|, for the split prefill products (kernels/gemm.h
// gemm_bf16_split with w_lo, kernels/moe_gemm.h with lo; ModelLoadOptions::cuda_quant_prefill_split).
void dequantize_bf16(bf16_bits* dst, const QuantMatrix& W, cudaStream_t stream, bf16_bits* lo = nullptr);

namespace ref {
void matmul_quant(float* y, const float* x, const QuantMatrix& W, int64_t T);
// As the device one; lo (when not null) = bf16(W - dst).
void dequantize_bf16(bf16_bits* dst, const QuantMatrix& W, bf16_bits* lo = nullptr);
}  // namespace ref

}  // namespace tandem::kernels
