// The per-format launchers behind kernels/quant_matmul.h and kernels/quant_moe.h (quant_matmul.cu
// and quant_moe.cu dispatch on QuantMatrix::format): block-scaled FP8 in quant_fp8.cu, NVFP4 in
// quant_nvfp4.cu. Same contracts as the public functions; callers use those.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/l2_prefetch.h"
#include "kernels/quant_weight.h"
#include "kernels/stream.h"

namespace tandem::kernels::detail {

void matmul_fp8(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);
// matmul_fp8 on the tensor cores for decode batches (quant_fp8_batched.cu): false, launching nothing,
// for a layout it does not take (block_in not a power of two >= 32, col_phase % 32, cols % 32, rows
// % 16); matmul_fp8 then keeps its token-tile kernels.
bool matmul_fp8_batched(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);
void dequantize_fp8_bf16(bf16_bits* dst, const QuantMatrix& W, cudaStream_t stream, bf16_bits* lo = nullptr);
void moe_gate_up_fp8(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T, int64_t K,
                     cudaStream_t stream, L2Prefetch next = {});
void moe_down_fp8(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                  int64_t T, int64_t K, cudaStream_t stream, bool follows_gate_up);

void matmul_nvfp4(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);
// matmul_nvfp4 on the tensor cores for decode batches (quant_nvfp4_batched.cu): false, launching
// nothing, for a layout it does not take (cols % 64, rows % 16); matmul_nvfp4 then keeps its token tiles.
bool matmul_nvfp4_batched(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream);
void dequantize_nvfp4_bf16(bf16_bits* dst, const QuantMatrix& W, cudaStream_t stream, bf16_bits* lo = nullptr);
void moe_gate_up_nvfp4(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T,
                       int64_t K, cudaStream_t stream, L2Prefetch next = {}, const float* x_split = nullptr,
                       bool act_split = false);
void moe_down_nvfp4(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                    int64_t T, int64_t K, cudaStream_t stream, bool follows_gate_up, bool act_split = false);
bool moe_act_split_nvfp4(const QuantMatrix& gate_up, const QuantMatrix& down, int64_t T);

}  // namespace tandem::kernels::detail
