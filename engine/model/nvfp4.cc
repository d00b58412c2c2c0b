#include "engine/model/nvfp4.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/model/safetensors.h"
#include "kernels/quant_weight.h"

namespace tandem::engine {

namespace {

// The stored tensor `name` with dtype `dt` and shape `want`, else InvalidArgument naming it (and
// the weight it belongs to).
absl::StatusOr<TensorView> Stored(const Checkpoint& ckpt, const std::string& name, DType dt,
                                  const std::vector<int64_t>& want, const WeightSlice& s) {
  ASSIGN_OR_RETURN(TensorView v, ckpt.View(name));
  if (v.dtype != dt || v.shape != want) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': expected ", DTypeName(dt), " ", ShapeString(want),
                                                   " (NVFP4 over '", s.name, "' ", ShapeString(s.shape), "), found ",
                                                   DTypeName(v.dtype), " ", ShapeString(v.shape)));
  }
  return v;
}

}  // namespace

float E2m1ToFloat(uint8_t code) { return kernels::E2m1ToFloat(code); }

std::string WeightScaleName(const std::string& weight) { return weight + "_scale"; }
std::string WeightScale2Name(const std::string& weight) { return weight + "_scale_2"; }

bool IsNvfp4Weight(const Checkpoint& ckpt, const std::string& weight) {
  return ckpt.Has(WeightScaleName(weight)) && ckpt.Has(WeightScale2Name(weight));
}

absl::StatusOr<Tensor> ReadNvfp4Slice(const Checkpoint& ckpt, const WeightSlice& s) {
  const int mat0 = s.index >= 0 ? 1 : 0;  // the first of the two matrix dims
  if (s.shape.size() != static_cast<size_t>(mat0 + 2) || s.shape.back() % kNvfp4Group != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' ", ShapeString(s.shape),
                                                   " has NVFP4 scales but is not a matrix (or a stack of them) whose "
                                                   "inputs are a multiple of ", kNvfp4Group));
  }
  const int64_t stack = mat0 ? s.shape[0] : 1, rows = s.shape[mat0], cols = s.shape[mat0 + 1];
  const int mdim = s.dim - mat0;  // 0: a slice of rows, 1: of columns
  if (mdim != 0 && mdim != 1) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "': slice dim ", s.dim, " out of range"));
  }
  const int64_t extent = mdim == 0 ? rows : cols;
  if (s.start < 0 || s.len < 0 || s.start + s.len > extent || s.index >= stack) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "': slice [", s.start, ", ", s.start + s.len,
                                                   ") of dim ", s.dim, " out of range for ", ShapeString(s.shape)));
  }
  if (mdim == 1 && (s.start % kNvfp4Group != 0 || s.len % kNvfp4Group != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", s.name, "': NVFP4 columns [", s.start, ", ", s.start + s.len, ") do not fall on groups of ",
        kNvfp4Group, " inputs (a tensor-parallel split of this weight needs a multiple of ", kNvfp4Group, " per rank)"));
  }
  std::vector<int64_t> packed(s.shape), grouped(s.shape);
  packed.back() = cols / 2;
  grouped.back() = cols / kNvfp4Group;
  ASSIGN_OR_RETURN(TensorView w, Stored(ckpt, s.name, DType::kU8, packed, s));
  ASSIGN_OR_RETURN(TensorView g, Stored(ckpt, WeightScaleName(s.name), DType::kF8E4M3, grouped, s));
  // One second-level scale per weight; a stack may carry one per expert.
  const std::string s2_name = WeightScale2Name(s.name);
  ASSIGN_OR_RETURN(std::vector<int64_t> s2_shape, ckpt.Shape(s2_name));
  const bool per_expert = mat0 == 1 && s2_shape == std::vector<int64_t>{stack};
  ASSIGN_OR_RETURN(TensorView g2, Stored(ckpt, s2_name, DType::kF32, per_expert ? s2_shape : std::vector<int64_t>{}, s));
  Tensor scale2;
  scale2.data.resize(per_expert ? stack : 1);
  RETURN_IF_ERROR(ConvertToFloat(DType::kF32, g2.data, scale2.data.size(), scale2.data.data()));
  const int64_t e = s.index >= 0 ? s.index : 0;
  const float global = scale2.data[per_expert ? e : 0];

  const int64_t r0 = mdim == 0 ? s.start : 0, c0 = mdim == 1 ? s.start : 0;
  const int64_t nr = mdim == 0 ? s.len : rows, nc = mdim == 1 ? s.len : cols;
  Tensor t;
  t.shape.assign(s.shape.begin() + mat0, s.shape.end());
  t.shape[mdim] = s.len;
  t.data.resize(static_cast<size_t>(nr * nc));
  const uint8_t* wbase = w.data + e * rows * (cols / 2);
  const uint8_t* gbase = g.data + e * rows * (cols / kNvfp4Group);
  for (int64_t r = 0; r < nr; ++r) {
    const uint8_t* wrow = wbase + (r0 + r) * (cols / 2);
    const uint8_t* grow = gbase + (r0 + r) * (cols / kNvfp4Group);
    float* out = t.data.data() + r * nc;
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t i = c0 + c;
      const uint8_t byte = wrow[i / 2];
      const uint8_t code = (i % 2 == 0) ? (byte & 0xf) : (byte >> 4);
      out[c] = E2m1ToFloat(code) * F8E4M3ToFloat(grow[i / kNvfp4Group]) * global;
    }
  }
  return t;
}

}  // namespace tandem::engine
