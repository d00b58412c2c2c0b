#include "kernels/quant_matmul.h"

#include "kernels/cuda_check.h"
#include "kernels/quant_detail.h"

namespace tandem::kernels {

void matmul_quant(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream) {
  KERNEL_REQUIRE(W.count == 1 && W.cols % 16 == 0);
  if (T == 0 || W.rows == 0) return;
  switch (W.format) {
    case WeightFormat::kFp8Block: detail::matmul_fp8(y, x, W, T, stream); return;
    case WeightFormat::kNvfp4: detail::matmul_nvfp4(y, x, W, T, stream); return;
    default: KERNEL_REQUIRE(false && "matmul_quant: FP8 or NVFP4 weights only (bf16: matmul_bf16)");
  }
}

void dequantize_bf16(bf16_bits* dst, const QuantMatrix& W, cudaStream_t stream, bf16_bits* lo) {
  if (W.count == 0 || W.rows == 0 || W.cols == 0) return;
  switch (W.format) {
    case WeightFormat::kFp8Block: detail::dequantize_fp8_bf16(dst, W, stream, lo); return;
    case WeightFormat::kNvfp4: detail::dequantize_nvfp4_bf16(dst, W, stream, lo); return;
    default: KERNEL_REQUIRE(false && "dequantize_bf16: FP8 or NVFP4 weights only");
  }
}

}  // namespace tandem::kernels
