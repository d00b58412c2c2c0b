// The per-format launchers behind kernels/quant_matmul.h and kernels/quant_moe.h (quant_matmul.cu
// and quant_moe.cu dispatch on QuantMatrix::format): block-scaled FP8 in quant_fp8.cu, NVFP4 in
// quant_nvfp4.cu. Same contracts as the public functions; callers use those.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/quant_weight.h"
#include "kernels/staged_norm_matmul.h"
#include "kernels/stream.h"

namespace tandem::kernels::detail {

void matmul_fp8(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);
// matmul_fp8 on the tensor cores for decode batches (quant_fp8_batched.cu): false, launching nothing,
// for a layout it does not take (block_in not a power of two >= 32, col_phase % 32, cols % 32, rows
// % 16); matmul_fp8 then keeps its token-tile kernels.
bool matmul_fp8_batched(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);
void dequantize_fp8_bf16(bf16_bits* dst, const QuantMatrix& W, cudaStream_t stream, bf16_bits* lo = nullptr);
void moe_gate_up_fp8(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T, int64_t K,
                     cudaStream_t stream);
void moe_down_fp8(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                  int64_t T, int64_t K, cudaStream_t stream, bool follows_gate_up);

// add_rmsnorm_matmul_staged (`norm`) or matmul_staged (kernels/staged_norm_matmul.h) of an FP8 /
// NVFP4 matrix: false, launching nothing, where the staged form does not take the layout or the step.
bool norm_matmul_fp8_staged(bool norm, float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                            const bf16_bits* norm_w, const QuantMatrix& W, float eps, cudaStream_t stream,
                            float w_offset, const StagedReady* ready);
bool norm_matmul_nvfp4_staged(bool norm, float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                              const bf16_bits* norm_w, const QuantMatrix& W, float eps, cudaStream_t stream,
                              float w_offset, const StagedReady* ready);

void matmul_nvfp4(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);
// matmul_nvfp4 on the tensor cores for decode batches (quant_nvfp4_batched.cu): false, launching
// nothing, for a layout it does not take (cols % 64, rows % 16); matmul_nvfp4 then keeps its token tiles.
bool matmul_nvfp4_batched(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);
void dequantize_nvfp4_bf16(bf16_bits* dst, const QuantMatrix& W, cudaStream_t stream, bf16_bits* lo = nullptr);
void moe_gate_up_nvfp4(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T,
                       int64_t K, cudaStream_t stream);
void moe_down_nvfp4(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                    int64_t T, int64_t K, cudaStream_t stream, bool follows_gate_up);

}  // namespace tandem::kernels::detail
