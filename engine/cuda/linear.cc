#include "engine/cuda/linear.h"

#include <string>

#include "common/status.h"
#include "kernels/gemm.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul.h"

namespace tandem::engine::cuda {

using kernels::WeightFormat;

int64_t LinearWeight::device_bytes() const {
  return quantized() ? q_.count * q_.matrix_bytes() : bf16_.size() * static_cast<int64_t>(sizeof(kernels::bf16_bits));
}

DeviceArray<kernels::bf16_bits>& LinearWeight::SetBf16(int64_t count, int64_t rows, int64_t cols) {
  data_.Free();
  scales_.Free();
  group_scales_.Free();
  row_scale2_.Free();
  q_ = kernels::QuantMatrix{};
  q_.count = count;
  q_.rows = rows;
  q_.cols = cols;
  return bf16_;
}

absl::Status LinearWeight::AllocateQuant(WeightFormat format, int64_t count, int64_t rows, int64_t cols,
                                         int64_t block_in, int64_t row_block) {
  if (format == WeightFormat::kBf16) return absl::InternalError("AllocateQuant of a bf16 weight");
  // The quantized kernels read 16 columns at a time (an NVFP4 group; FP8 rows as 16-byte loads).
  if (cols % kernels::kNvfp4GroupSize != 0) {
    return absl::UnimplementedError("cuda backend: a quantized weight needs a multiple of 16 columns (rank's slice: " +
                                    std::to_string(cols) + ")");
  }
  bf16_.Free();
  if (format == WeightFormat::kFp8Block && (block_in <= 0 || row_block <= 0)) {
    return absl::InternalError("FP8 weight without its block size");
  }
  kernels::QuantMatrix q = kernels::QuantMatrix::Layout(format, count, rows, cols, block_in, row_block);
  RETURN_IF_ERROR(data_.Allocate(count * q.data_bytes()));
  RETURN_IF_ERROR(scales_.Allocate(count * q.scale_stride()));
  RETURN_IF_ERROR(group_scales_.Allocate(count * q.group_scale_stride()));
  RETURN_IF_ERROR(row_scale2_.Allocate(count * q.row_scale2_stride()));
  q.data = data_.get();
  if (format == WeightFormat::kFp8Block) q.scales = scales_.get();
  if (format == WeightFormat::kNvfp4) {
    q.group_scales = group_scales_.get();
    q.row_scale2 = row_scale2_.get();
  }
  q_ = q;
  return absl::OkStatus();
}

absl::Status LinearWeight::Upload(const QuantPack& pack) {
  RETURN_IF_ERROR(AllocateQuant(pack.format, pack.count, pack.rows, pack.cols, pack.block_in, pack.row_block));
  q_.col_phase = pack.col_phase;
  const kernels::QuantMatrix& q = q_;
  if (static_cast<int64_t>(pack.data.size()) != q.count * q.data_bytes() ||
      static_cast<int64_t>(pack.scales.size()) != q.count * q.scale_stride() ||
      static_cast<int64_t>(pack.group_scales.size()) != q.count * q.group_scale_stride() ||
      static_cast<int64_t>(pack.row_scale2.size()) != q.count * q.row_scale2_stride()) {
    return absl::InternalError("quantized weight: packed arrays do not match their descriptor");
  }
  auto up = [](void* dst, const void* src, size_t bytes, const char* what) {
    return bytes == 0 ? absl::OkStatus() : CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), what);
  };
  RETURN_IF_ERROR(up(data_.get(), pack.data.data(), pack.data.size(), "upload quantized weight"));
  RETURN_IF_ERROR(up(scales_.get(), pack.scales.data(), pack.scales.size() * sizeof(float), "upload FP8 scales"));
  RETURN_IF_ERROR(up(group_scales_.get(), pack.group_scales.data(), pack.group_scales.size(), "upload NVFP4 scales"));
  return up(row_scale2_.get(), pack.row_scale2.data(), pack.row_scale2.size() * sizeof(float), "upload NVFP4 scales");
}

absl::StatusOr<const kernels::bf16_bits*> DequantizeToScratch(const LinearWeight& w, const DequantScratch& scratch,
                                                               cudaStream_t stream) {
  if (scratch.data == nullptr || scratch.elems < w.dequant_elems()) {
    return absl::InternalError("dequantization scratch of " + std::to_string(scratch.elems) + " values, the weight has " +
                               std::to_string(w.dequant_elems()));
  }
  kernels::dequantize_bf16(scratch.data, w.quant(), stream);
  return scratch.data;
}

absl::StatusOr<SplitWeight> DequantizeSplitToScratch(const LinearWeight& w, const DequantScratch& scratch,
                                                     cudaStream_t stream) {
  const int64_t half = w.dequant_elems();  // hi's values, then lo's
  if (scratch.data == nullptr || scratch.elems < 2 * half) {
    return absl::InternalError("dequantization scratch of " + std::to_string(scratch.elems) +
                               " values, the split weight has " + std::to_string(2 * half));
  }
  // lo on a 16-byte boundary (the dequantization and the grouped GEMM store and load 16 bytes).
  if (half % 8 != 0) {
    return absl::InternalError("split dequantization of a weight of " + std::to_string(half) + " values");
  }
  SplitWeight split{scratch.data, scratch.data + half};
  kernels::dequantize_bf16(scratch.data, w.quant(), stream, scratch.data + half);
  return split;
}

absl::Status LinearMatmul(float* y, const float* x, const LinearWeight& w, int64_t T, const DequantScratch& scratch,
                          cudaStream_t stream, int64_t gemm_min_tokens) {
  if (!w.quantized()) {
    kernels::matmul_bf16(y, x, w.bf16(), T, w.cols(), w.rows(), stream, gemm_min_tokens);
    return absl::OkStatus();
  }
  if (!kernels::UseGemmPath(T, gemm_min_tokens, stream)) {
    kernels::matmul_quant(y, x, w.quant(), T, stream);
    return absl::OkStatus();
  }
  if (scratch.split) {
    // Float32-grade prefill: W as bf16 hi + lo and x split alike, three cuBLAS products. Without
    // cuBLAS, the quantized kernels (exact weights, float32 x) rather than a rounded product.
    ASSIGN_OR_RETURN(const SplitWeight split, DequantizeSplitToScratch(w, scratch, stream));
    if (!kernels::gemm_bf16_split(y, x, split.hi, T, w.cols(), w.rows(), stream, split.lo)) {
      kernels::matmul_quant(y, x, w.quant(), T, stream);
    }
    return absl::OkStatus();
  }
  // Prefill: the weight once to bf16, then the bf16 product, which takes cuBLAS at this T (or its
  // own kernels where cuBLAS cannot be loaded).
  ASSIGN_OR_RETURN(const kernels::bf16_bits* bf16, DequantizeToScratch(w, scratch, stream));
  kernels::matmul_bf16(y, x, bf16, T, w.cols(), w.rows(), stream, gemm_min_tokens);
  return absl::OkStatus();
}

}  // namespace tandem::engine::cuda
