// One rank's quantized weight in the layout the GPU kernels read (kernels/quant_weight.h
// QuantMatrix), packed on the host from a WeightSpec (engine/model/layer_weights.h) without
// dequantizing: the e4m3 bytes / e2m1 pairs of the slices, packed as ReadWeightSlice packs floats,
// and the scales re-indexed for the shard, so that DequantAt over the packed arrays gives exactly
// ReadWeightSlice's floats. Backends that keep weights quantized upload these arrays as they are.
//
// The format is read from the tensors, as ReadWeightSlice does: `X.weight` F8_E4M3 with
// `X.weight_scale_inv` beside it is block-scaled FP8, `X.weight` U8 with `X.weight_scale` and
// `X.weight_scale_2` is NVFP4, anything else is not quantized.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "kernels/quant_weight.h"

namespace tandem::engine {

// The arrays of a QuantMatrix on the host (format kBf16: the spec is not quantized, nothing packed).
struct QuantPack {
  kernels::WeightFormat format = kernels::WeightFormat::kBf16;
  int64_t rows = 0, cols = 0, count = 1;  // of one matrix; count matrices (experts) back to back
  std::vector<uint8_t> data;              // e4m3 bytes, or e2m1 pairs (even column in the low nibble)
  // kFp8Block: scale_rows x scale_cols per matrix (QuantMatrix explains the indexing).
  std::vector<float> scales;
  int64_t block_in = 0, row_block = 1, col_phase = 0;
  // kNvfp4: one e4m3 scale per 16 columns, one float32 second-level scale per row.
  std::vector<uint8_t> group_scales;
  std::vector<float> row_scale2;

  // The descriptor over these host arrays (valid while the pack lives and is not changed).
  kernels::QuantMatrix View() const;
};

// `a` with `b`'s slices packed after its own, as the GPU backend reads two weights in one product:
// b's rows under a's when both are [rows, cols] (the attention gate under q|k|v), or b as one more
// matrix of the stack a [count, rows, cols] when b is [rows, cols] (the shared expert after the
// experts).
WeightSpec AppendSpec(WeightSpec a, const WeightSpec& b);

// The format of the spec's tensors: kBf16 when none is quantized. InvalidArgument naming two
// tensors when the slices mix formats (a quantized weight packed with a bf16 one, FP8 with NVFP4).
absl::StatusOr<kernels::WeightFormat> SpecFormat(const Checkpoint& ckpt, const WeightSpec& spec);

// This rank's arrays of `spec` ([rows, cols], or [count, rows, cols] for a stack whose slices give
// the matrices one after another). FP8: row_block = the checkpoint's block_out when every row slice
// starts on a block boundary inside its matrix and its tensor (and all but a matrix's last end on
// one), else 1 with each block's scale row repeated per weight row; col_phase = the first column
// modulo block_in, the same for every slice. NVFP4: a column slice must start and end on 16-column
// groups. InvalidArgument naming the tensor: mixed formats, a scale of the wrong shape or dtype,
// column slices of different phases, an NVFP4 split off a group, a slice that is not whole rows of
// the packed matrix.
absl::StatusOr<QuantPack> PackQuantWeight(const Checkpoint& ckpt, const WeightSpec& spec);

}  // namespace tandem::engine
