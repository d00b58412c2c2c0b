// A Hugging Face checkpoint folder: one model.safetensors or shards listed in
// model.safetensors.index.json; memory-mapped; dtypes bf16, f16, f32 (converted to float32 on read)
// and F8_E4M3 for a weight `X.weight` with its `X.weight_scale_inv` beside it (read as the e4m3
// values, unscaled: ReadWeightSlice in layer_weights.h applies the block scales; an F8 tensor
// without its scale is refused naming it).
//
// What: name -> tensor lookup over every .safetensors file of a folder. Open() accepts, in this
// order: model.safetensors.index.json (its weight_map; every listed shard must exist and hold the
// tensors listed for it), a single model.safetensors, or several *.safetensors without an index.
// Files are mmapped read-only (engine/model/safetensors.h), so opening costs page cache only; a
// Read converts to float32 into a fresh buffer. Shapes are as stored by Hugging Face: a Linear
// weight is [out_features, in_features], so for tensor parallelism column-parallel weights
// (q/k/v, gate/up) are sliced along dim 0 and row-parallel ones (o_proj, down) along dim 1.
// Thread safety: after Open, every method is const and may be called from many threads at once
// (loading converts tensors in parallel).
// Why virtual: tests and later backends may provide checkpoints that are not files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/load_progress.h"

namespace tandem::engine {

// kF8E4M3: "F8_E4M3", the e4m3fn format of block-scaled FP8 checkpoints (1 byte).
enum class DType { kBF16, kF16, kF32, kI32, kI64, kU8, kI8, kBool, kF64, kI16, kF8E4M3 };
const char* DTypeName(DType t);
size_t DTypeSize(DType t);

// A float32 tensor, row-major.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t numel() const;
};

// A tensor as stored in a file (see Checkpoint::View).
struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // little-endian, row-major; inside a read-only mmap
  uint64_t nbytes = 0;
  std::string file;               // the .safetensors file holding it
};

// "X.weight" -> "X.weight_scale_inv": the float32 block scales of a block-scaled FP8 weight
// (a fused experts stack "...experts.gate_up_proj" has "...experts.gate_up_proj_scale_inv").
std::string WeightScaleInvName(const std::string& weight);

class Checkpoint {
 public:
  virtual ~Checkpoint() = default;
  // Opens <dir>; parses every safetensors header (errors name the file and what is wrong).
  // `progress` (optional, must outlive the checkpoint) gets the totals now and counts every read.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir, LoadProgress* progress = nullptr);

  virtual bool Has(const std::string& name) const = 0;
  // Shape as stored; NotFound naming the tensor when absent.
  virtual absl::StatusOr<std::vector<int64_t>> Shape(const std::string& name) const = 0;
  // Whole tensor as float32. `expected_shape` must match exactly (InvalidArgument: "tensor 'X' in
  // FILE: expected shape [a, b], found [c, d]"). NotFound: "tensor 'X' not found in DIR".
  // InvalidArgument naming the tensor when its dtype is not BF16, F16 or F32, or F8_E4M3 without
  // its weight_scale_inv (an F8_E4M3 tensor reads as its unscaled e4m3 values).
  virtual absl::StatusOr<Tensor> Read(const std::string& name,
                                      const std::vector<int64_t>& expected_shape) const = 0;
  // A contiguous slice along `dim` ([start, start+len)), as float32, for tensor-parallel shards.
  // The full tensor must have `expected_shape`.
  virtual absl::StatusOr<Tensor> ReadSlice(const std::string& name,
                                           const std::vector<int64_t>& expected_shape, int dim,
                                           int64_t start, int64_t len) const = 0;
  // The same slice of the sub-tensor `index` of dim 0 (a fused-experts tensor [E, rows, cols]
  // holds expert e at index e): `dim` (>= 1) counts the stored tensor's dims, so the result has
  // the stored shape less dim 0, with shape[dim] = len. The default reads the whole sub-tensor
  // through ReadSlice and cuts it; file checkpoints read only the slice.
  virtual absl::StatusOr<Tensor> ReadIndexedSlice(const std::string& name,
                                                  const std::vector<int64_t>& expected_shape,
                                                  int64_t index, int dim, int64_t start,
                                                  int64_t len) const;
  // Every tensor name, sorted.
  virtual std::vector<std::string> Names() const = 0;

  // The stored bytes of one tensor, unconverted, valid while the Checkpoint lives: for backends
  // that upload bf16 as is. The default says Unimplemented (non-file checkpoints).
  virtual absl::StatusOr<TensorView> View(const std::string& name) const;
};

}  // namespace tandem::engine
