#include "engine/model/quant_pack.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/model/nvfp4.h"
#include "engine/model/safetensors.h"

namespace tandem::engine {

namespace {

using kernels::WeightFormat;

const char* FormatName(WeightFormat f) {
  return f == WeightFormat::kFp8Block ? "block-scaled FP8" : f == WeightFormat::kNvfp4 ? "NVFP4" : "bf16";
}

WeightFormat SliceFormat(const Checkpoint& ckpt, const WeightSlice& s) {
  if (IsNvfp4Weight(ckpt, s.name)) return WeightFormat::kNvfp4;
  if (ckpt.Has(WeightScaleInvName(s.name))) return WeightFormat::kFp8Block;
  return WeightFormat::kBf16;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A slice's place in its stored tensor: the matrix (entry `entry` of a stack) and the rows and
// columns it covers.
struct Geometry {
  int64_t entry = 0, stack = 1;  // stack: entries of dim 0 (1 for a plain matrix)
  int64_t rows = 0, cols = 0;    // of the stored matrix (dequantized columns)
  int64_t r0 = 0, c0 = 0, nr = 0, nc = 0;
};

absl::StatusOr<Geometry> SliceGeometry(const WeightSlice& s) {
  const int mat0 = s.index >= 0 ? 1 : 0;
  if (s.shape.size() != static_cast<size_t>(mat0 + 2)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' ", ShapeString(s.shape),
                                                   " is quantized but not a matrix (or a stack of them)"));
  }
  Geometry g;
  g.stack = mat0 ? s.shape[0] : 1;
  g.entry = mat0 ? s.index : 0;
  g.rows = s.shape[mat0];
  g.cols = s.shape[mat0 + 1];
  const int mdim = s.dim - mat0;
  const int64_t extent = mdim == 0 ? g.rows : g.cols;
  if ((mdim != 0 && mdim != 1) || s.start < 0 || s.len < 0 || s.start + s.len > extent || g.entry >= g.stack) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "': slice [", s.start, ", ", s.start + s.len,
                                                   ") of dim ", s.dim, " out of range for ", ShapeString(s.shape)));
  }
  g.r0 = mdim == 0 ? s.start : 0;
  g.c0 = mdim == 1 ? s.start : 0;
  g.nr = mdim == 0 ? s.len : g.rows;
  g.nc = mdim == 1 ? s.len : g.cols;
  return g;
}

// Where one packed row comes from.
struct RowSource {
  const WeightSlice* slice = nullptr;
  Geometry g;
  int64_t src_row = 0;  // row of the stored matrix
};

// Rows of one slice are consecutive: its checks and tensor lookups happen at its first row.
bool FirstRowOfSlice(const std::vector<RowSource>& src, size_t R) { return R == 0 || src[R - 1].slice != src[R].slice; }

// The stored tensor `name` as `dt` of `shape`, else InvalidArgument naming it and its weight.
absl::StatusOr<TensorView> Stored(const Checkpoint& ckpt, const std::string& name, DType dt,
                                  const std::vector<int64_t>& shape, const WeightSlice& s, const char* what) {
  ASSIGN_OR_RETURN(TensorView v, ckpt.View(name));
  if (v.dtype != dt || v.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': expected ", DTypeName(dt), " ",
                                                   ShapeString(shape), " (", what, " over '", s.name, "' ",
                                                   ShapeString(s.shape), "), found ", DTypeName(v.dtype), " ",
                                                   ShapeString(v.shape)));
  }
  return v;
}

// Block-scaled FP8: the e4m3 bytes of each packed row and the scale rows of its blocks.
absl::Status PackFp8(const Checkpoint& ckpt, const std::vector<RowSource>& src, QuantPack& p) {
  const WeightSlice& first = *src[0].slice;
  const int64_t bo = first.block_out, bi = first.block_in;
  if (bo <= 0 || bi <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", first.name,
                                                   "' has block scales but config.json gives no weight_block_size"));
  }
  struct Tensors {
    TensorView w;
    Tensor scale;  // [stack, ceil(rows / bo), ceil(cols / bi)] as float32
    int64_t scale_cols = 0, scale_rows = 0;
  };
  std::map<std::string, Tensors> stored;
  p.block_in = bi;
  p.col_phase = src[0].g.c0 % bi;
  bool aligned = true;  // every slice starts on a block in its matrix and its tensor
  for (size_t R = 0; R < src.size(); ++R) {
    if (!FirstRowOfSlice(src, R)) continue;
    const RowSource& rs = src[R];
    const WeightSlice& s = *rs.slice;
    if (s.block_out != bo || s.block_in != bi) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "': block size differs from '", first.name,
                                                     "' in one packed weight"));
    }
    if (rs.g.c0 % bi != p.col_phase) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "': columns from ", rs.g.c0,
                                                     " start at another offset inside a ", bi, "-column block than '",
                                                     first.name, "' (from ", src[0].g.c0,
                                                     "), packed into one weight"));
    }
    const int64_t m = static_cast<int64_t>(R) % p.rows;  // the slice's first row in its matrix
    const bool ends = rs.g.nr % bo == 0 || m + rs.g.nr == p.rows;
    if (m % bo != 0 || rs.g.r0 % bo != 0 || !ends) aligned = false;
    if (stored.count(s.name) > 0) continue;
    Tensors t;
    ASSIGN_OR_RETURN(t.w, Stored(ckpt, s.name, DType::kF8E4M3, s.shape, s, "FP8 weight"));
    const std::string scale_name = WeightScaleInvName(s.name);
    std::vector<int64_t> want(s.shape.begin(), s.shape.end() - 2);
    want.push_back(t.scale_rows = CeilDiv(rs.g.rows, bo));
    want.push_back(t.scale_cols = CeilDiv(rs.g.cols, bi));
    ASSIGN_OR_RETURN(std::vector<int64_t> got, ckpt.Shape(scale_name));
    if (got != want) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", scale_name, "': expected shape ", ShapeString(want),
                                                     " (blocks of [", bo, ", ", bi, "] over '", s.name, "' ",
                                                     ShapeString(s.shape), "), found ", ShapeString(got)));
    }
    ASSIGN_OR_RETURN(t.scale, ckpt.Read(scale_name, want));
    stored.emplace(s.name, std::move(t));
  }
  p.row_block = aligned ? bo : 1;
  const int64_t rows = p.rows, cols = p.cols;
  p.data.resize(static_cast<size_t>(p.count * rows * cols));
  const TensorView* w = nullptr;
  for (size_t R = 0; R < src.size(); ++R) {
    const RowSource& rs = src[R];
    if (FirstRowOfSlice(src, R)) w = &stored.at(rs.slice->name).w;
    const uint8_t* row = w->data + (rs.g.entry * rs.g.rows + rs.src_row) * rs.g.cols + rs.g.c0;
    std::memcpy(p.data.data() + R * cols, row, static_cast<size_t>(cols));
  }
  const kernels::QuantMatrix view = p.View();
  const int64_t scale_rows = view.scale_rows(), scale_cols = view.scale_cols();
  p.scales.resize(static_cast<size_t>(p.count * scale_rows * scale_cols));
  for (int64_t e = 0; e < p.count; ++e) {
    for (int64_t sr = 0; sr < scale_rows; ++sr) {
      const RowSource& rs = src[e * rows + sr * p.row_block];
      const Tensors& t = stored.at(rs.slice->name);  // once per scale row, not per weight row
      const int64_t first_col = rs.g.c0 / bi;
      if (first_col + scale_cols > t.scale_cols) {
        return absl::InternalError(absl::StrCat("tensor '", rs.slice->name, "': packed scale columns past the stored"));
      }
      const float* srow =
          t.scale.data.data() + (rs.g.entry * t.scale_rows + rs.src_row / bo) * t.scale_cols + first_col;
      std::memcpy(p.scales.data() + (e * scale_rows + sr) * scale_cols, srow, scale_cols * sizeof(float));
    }
  }
  return absl::OkStatus();
}

// NVFP4: the e2m1 pairs and group scales of each packed row, and its tensor's second-level scale.
absl::Status PackNvfp4(const Checkpoint& ckpt, const std::vector<RowSource>& src, QuantPack& p) {
  if (p.cols % kNvfp4Group != 0) {
    return absl::InvalidArgumentError(absl::StrCat("NVFP4 weight from '", src[0].slice->name, "': ", p.cols,
                                                   " packed columns are not a multiple of ", kNvfp4Group));
  }
  struct Tensors {
    TensorView w, g;
    std::vector<float> scale2;  // one, or one per entry of a stack
  };
  std::map<std::string, Tensors> stored;
  for (size_t R = 0; R < src.size(); ++R) {
    if (!FirstRowOfSlice(src, R)) continue;
    const RowSource& rs = src[R];
    const WeightSlice& s = *rs.slice;
    if (rs.g.c0 % kNvfp4Group != 0 || rs.g.cols % kNvfp4Group != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", s.name, "': NVFP4 columns [", rs.g.c0, ", ", rs.g.c0 + rs.g.nc,
                       ") do not fall on groups of ", kNvfp4Group, " inputs (a tensor-parallel split of this weight "
                       "needs a multiple of ", kNvfp4Group, " per rank)"));
    }
    if (stored.count(s.name) > 0) continue;
    Tensors t;
    std::vector<int64_t> packed(s.shape), grouped(s.shape);
    packed.back() = rs.g.cols / 2;
    grouped.back() = rs.g.cols / kNvfp4Group;
    ASSIGN_OR_RETURN(t.w, Stored(ckpt, s.name, DType::kU8, packed, s, "NVFP4"));
    ASSIGN_OR_RETURN(t.g, Stored(ckpt, WeightScaleName(s.name), DType::kF8E4M3, grouped, s, "NVFP4"));
    const std::string s2_name = WeightScale2Name(s.name);
    ASSIGN_OR_RETURN(std::vector<int64_t> s2_shape, ckpt.Shape(s2_name));
    const bool per_entry = s.index >= 0 && s2_shape == std::vector<int64_t>{rs.g.stack};
    ASSIGN_OR_RETURN(TensorView g2, Stored(ckpt, s2_name, DType::kF32,
                                           per_entry ? s2_shape : std::vector<int64_t>{}, s, "NVFP4"));
    t.scale2.resize(per_entry ? rs.g.stack : 1);
    std::memcpy(t.scale2.data(), g2.data, t.scale2.size() * sizeof(float));
    stored.emplace(s.name, std::move(t));
  }
  const int64_t cols = p.cols, groups = cols / kNvfp4Group;
  p.data.resize(static_cast<size_t>(p.count * p.rows * cols / 2));
  p.group_scales.resize(static_cast<size_t>(p.count * p.rows * groups));
  p.row_scale2.resize(static_cast<size_t>(p.count * p.rows));
  const Tensors* tp = nullptr;
  for (size_t R = 0; R < src.size(); ++R) {
    const RowSource& rs = src[R];
    if (FirstRowOfSlice(src, R)) tp = &stored.at(rs.slice->name);
    const Tensors& t = *tp;
    const int64_t stored_row = rs.g.entry * rs.g.rows + rs.src_row;
    std::memcpy(p.data.data() + R * (cols / 2), t.w.data + stored_row * (rs.g.cols / 2) + rs.g.c0 / 2,
                static_cast<size_t>(cols / 2));
    std::memcpy(p.group_scales.data() + R * groups,
                t.g.data + stored_row * (rs.g.cols / kNvfp4Group) + rs.g.c0 / kNvfp4Group, static_cast<size_t>(groups));
    p.row_scale2[R] = t.scale2[t.scale2.size() > 1 ? rs.g.entry : 0];
  }
  return absl::OkStatus();
}

}  // namespace

kernels::QuantMatrix QuantPack::View() const {
  kernels::QuantMatrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.count = count;
  m.data = data.data();
  m.scales = scales.data();
  m.block_in = block_in;
  m.row_block = row_block;
  m.col_phase = col_phase;
  m.group_scales = group_scales.data();
  m.row_scale2 = row_scale2.data();
  return m;
}

WeightSpec AppendSpec(WeightSpec a, const WeightSpec& b) {
  if (a.shape.size() == 3) {
    a.shape[0] += 1;
  } else {
    a.shape[0] += b.shape.empty() ? 0 : b.shape[0];
  }
  a.slices.insert(a.slices.end(), b.slices.begin(), b.slices.end());
  return a;
}

absl::StatusOr<WeightFormat> SpecFormat(const Checkpoint& ckpt, const WeightSpec& spec) {
  if (spec.slices.empty()) return WeightFormat::kBf16;
  const WeightFormat f = SliceFormat(ckpt, spec.slices[0]);
  for (const WeightSlice& s : spec.slices) {
    const WeightFormat g = SliceFormat(ckpt, s);
    if (g != f) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' (", FormatName(g), ") is packed into one ",
                                                     "weight with '", spec.slices[0].name, "' (", FormatName(f),
                                                     "): a weight must be all in one format"));
    }
  }
  return f;
}

absl::StatusOr<QuantPack> PackQuantWeight(const Checkpoint& ckpt, const WeightSpec& spec) {
  QuantPack p;
  ASSIGN_OR_RETURN(p.format, SpecFormat(ckpt, spec));
  if (p.format == WeightFormat::kBf16) return p;
  const std::string& name0 = spec.slices[0].name;
  if (spec.shape.size() != 2 && spec.shape.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("quantized weight from '", name0, "' packs into ",
                                                   ShapeString(spec.shape), ", not a matrix or a stack of them"));
  }
  p.count = spec.shape.size() == 3 ? spec.shape[0] : 1;
  p.rows = spec.shape[spec.shape.size() - 2];
  p.cols = spec.shape.back();
  // Each slice gives whole rows of the packed matrices, never crossing from one matrix to the next.
  std::vector<RowSource> src;
  src.reserve(static_cast<size_t>(p.count * p.rows));
  for (const WeightSlice& s : spec.slices) {
    ASSIGN_OR_RETURN(Geometry g, SliceGeometry(s));
    const int64_t m = static_cast<int64_t>(src.size()) % std::max<int64_t>(p.rows, 1);
    if (g.nc != p.cols || m + g.nr > p.rows) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "': a slice of ", g.nr, " x ", g.nc,
                                                     " does not give whole rows of one matrix of the packed ",
                                                     ShapeString(spec.shape)));
    }
    for (int64_t i = 0; i < g.nr; ++i) src.push_back(RowSource{&s, g, g.r0 + i});
  }
  if (static_cast<int64_t>(src.size()) != p.count * p.rows || src.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("quantized weight from '", name0, "': its slices give ", src.size(),
                                                   " rows, the packed ", ShapeString(spec.shape), " has ",
                                                   p.count * p.rows));
  }
  if (p.format == WeightFormat::kFp8Block) {
    RETURN_IF_ERROR(PackFp8(ckpt, src, p));
  } else {
    RETURN_IF_ERROR(PackNvfp4(ckpt, src, p));
  }
  return p;
}

}  // namespace tandem::engine
