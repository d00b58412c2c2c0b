// A Hugging Face checkpoint folder: one model.safetensors or shards listed in
// model.safetensors.index.json; memory-mapped; dtypes bf16, f16, f32 (converted to float32 on read).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::engine {

enum class DType { kBF16, kF16, kF32, kI32, kI64, kU8, kI8, kBool, kF64, kI16 };
const char* DTypeName(DType t);
size_t DTypeSize(DType t);

// A float32 tensor, row-major.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t numel() const;
};

class Checkpoint {
 public:
  virtual ~Checkpoint() = default;
  // Opens <dir>; parses every safetensors header (errors name the file and what is wrong).
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir);

  virtual bool Has(const std::string& name) const = 0;
  // Shape as stored; NotFound naming the tensor when absent.
  virtual absl::StatusOr<std::vector<int64_t>> Shape(const std::string& name) const = 0;
  // Whole tensor as float32. `expected_shape` must match exactly (InvalidArgument: "tensor X:
  // expected shape [a, b], found [c, d] in FILE").
  virtual absl::StatusOr<Tensor> Read(const std::string& name,
                                      const std::vector<int64_t>& expected_shape) const = 0;
  // A contiguous slice along `dim` ([start, start+len)), as float32, for tensor-parallel shards.
  // The full tensor must have `expected_shape`.
  virtual absl::StatusOr<Tensor> ReadSlice(const std::string& name,
                                           const std::vector<int64_t>& expected_shape, int dim,
                                           int64_t start, int64_t len) const = 0;
  // Every tensor name, sorted.
  virtual std::vector<std::string> Names() const = 0;
};

}  // namespace tandem::engine
