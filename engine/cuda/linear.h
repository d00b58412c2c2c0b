// A linear's weight on the device in the checkpoint's format: bf16 (one array, as the cuda backend
// always kept weights), or block-scaled FP8 / NVFP4 kept quantized (kernels/quant_weight.h: the
// data and scale arrays and the QuantMatrix over them), so a quantized model occupies its quantized
// bytes. One call computes y = x W^T either way:
//   bf16                        kernels::matmul_bf16 (matvec for decode, cuBLAS for prefill)
//   quantized, decode-sized T   kernels::matmul_quant (dequantized in registers)
//   quantized, prefill-sized T  kernels::dequantize_bf16 into the model's dequantization scratch,
//                               then the bf16 prefill product on it; with DequantScratch::split
//                               the weight as bf16 hi + lo and kernels::gemm_bf16_split (float32-
//                               grade x and W, three tensor-core products)
// "Prefill-sized" is the bf16 path's own switch (kernels/gemm.h UseGemmPath at the model's
// gemm_min_tokens): never inside a captured decode graph, so a decode step launches no
// dequantization and allocates nothing.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "engine/cuda/device_array.h"
#include "engine/model/quant_pack.h"
#include "kernels/bf16.h"
#include "kernels/l2_prefetch.h"
#include "kernels/quant_weight.h"
#include "kernels/stream.h"

namespace tandem::engine::cuda {

// The model's one buffer that prefill products dequantize a quantized weight (or expert stack)
// into: sized at load for the largest one (WeightSource::largest_quantized_elems).
struct DequantScratch {
  kernels::bf16_bits* data = nullptr;
  int64_t elems = 0;
  // The split prefill (ModelLoadOptions::cuda_quant_prefill_split): products dequantize to bf16
  // hi + lo (DequantizeSplitToScratch), the scratch sized for both.
  bool split = false;
};

class LinearWeight {
 public:
  // [rows, cols] of each of `count` matrices (a stack of experts: count > 1).
  int64_t rows() const { return q_.rows; }
  int64_t cols() const { return q_.cols; }
  int64_t count() const { return q_.count; }
  kernels::WeightFormat format() const { return q_.format; }
  bool quantized() const { return q_.format != kernels::WeightFormat::kBf16; }
  // The bf16 weight (count, rows, cols); null when quantized.
  const kernels::bf16_bits* bf16() const { return quantized() ? nullptr : bf16_.get(); }
  // The device descriptor (data and scales on the device) of a quantized weight.
  const kernels::QuantMatrix& quant() const { return q_; }
  // Bf16 elements a prefill product dequantizes this weight into (0 for a bf16 weight; twice as
  // many in the split form, DequantizeSplitToScratch).
  int64_t dequant_elems() const { return quantized() ? q_.count * q_.rows * q_.cols : 0; }
  // Device bytes the weight occupies.
  int64_t device_bytes() const;
  // Its weight bytes (not the scales), for a kernel that asks the L2 for them ahead of their reader.
  kernels::L2Prefetch l2_range() const {
    if (quantized()) return kernels::L2Prefetch{q_.data, q_.count * q_.data_bytes()};
    return kernels::L2Prefetch{bf16_.get(), bf16_.size() * static_cast<int64_t>(sizeof(kernels::bf16_bits))};
  }

  // A bf16 weight of this shape; the array for the caller to fill.
  DeviceArray<kernels::bf16_bits>& SetBf16(int64_t count, int64_t rows, int64_t cols);
  // A quantized weight of this shape, its device arrays allocated (contents for the caller to
  // fill: RandomWeights). For kFp8Block, `block_in` and `row_block` as in QuantMatrix, col_phase 0.
  absl::Status AllocateQuant(kernels::WeightFormat format, int64_t count, int64_t rows, int64_t cols,
                             int64_t block_in = 0, int64_t row_block = 1);
  // The packed host arrays copied to the device.
  absl::Status Upload(const QuantPack& pack);
  // Writable device arrays of a quantized weight (null where the format has none).
  uint8_t* data() { return data_.get(); }
  float* scales() { return scales_.get(); }
  uint8_t* group_scales() { return group_scales_.get(); }
  float* row_scale2() { return row_scale2_.get(); }

 private:
  DeviceArray<kernels::bf16_bits> bf16_;
  DeviceArray<uint8_t> data_, group_scales_;
  DeviceArray<float> scales_, row_scale2_;
  kernels::QuantMatrix q_;  // format and shape; the device pointers of a quantized weight
};

// y (T, W.rows) = x (T, W.cols) W^T on `stream` for a single matrix (W.count == 1). A quantized W
// on a prefill-sized step (T >= gemm_min_tokens outside a graph capture: kernels/gemm.h
// UseGemmPath) needs `scratch` of at least W.dequant_elems() (Internal error otherwise).
absl::Status LinearMatmul(float* y, const float* x, const LinearWeight& w, int64_t T, const DequantScratch& scratch,
                          cudaStream_t stream, int64_t gemm_min_tokens);

// Dequantizes the quantized stack `w` into `scratch` (bf16, w's layout) and returns it: the input
// of the bf16 prefill kernels. Internal error when the scratch is too small.
absl::StatusOr<const kernels::bf16_bits*> DequantizeToScratch(const LinearWeight& w, const DequantScratch& scratch,
                                                               cudaStream_t stream);

// The split form (DequantScratch::split): hi = bf16(W) and lo = bf16(W - hi), each in w's layout,
// lo after hi in `scratch` (which needs 2 w.dequant_elems()).
struct SplitWeight {
  const kernels::bf16_bits* hi = nullptr;
  const kernels::bf16_bits* lo = nullptr;
};
absl::StatusOr<SplitWeight> DequantizeSplitToScratch(const LinearWeight& w, const DequantScratch& scratch,
                                                     cudaStream_t stream);

}  // namespace tandem::engine::cuda
