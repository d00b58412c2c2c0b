// safetensors: the weight file format of Hugging Face checkpoints.
//
// What: a parser for the (untrusted) header, a memory-mapped reader, and a small writer.
// Layout of a file: [u64 little-endian N][N bytes of JSON header][data section]. The header maps
// each tensor name to {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin, end]},
// offsets relative to the start of the data section; an optional "__metadata__" object holds
// string pairs. Tensors are row-major, little-endian.
//
// Why our own: the header is outside input (a downloaded file), so the parser validates
// everything before anything is read through a pointer (ParseSafetensorsHeader is the fuzz entry
// point, tests/fuzz/safetensors_header_fuzz.cc), and the reader maps files read-only so a 60 GB
// checkpoint costs page cache, not heap. The writer exists for `tandem-infer logits --out`, for
// tests that build broken checkpoints, and for random-weight checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"

namespace tandem::engine {

// The header may not exceed this many bytes (real headers of 60 GB checkpoints are < 2 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1000 * 1000;

// "BF16" -> kBF16, ...; InvalidArgument for names we do not know.
absl::StatusOr<DType> DTypeFromName(std::string_view name);

// One entry of the header, validated: dtype known, shape non-negative, numel * dtype size ==
// data_end - data_begin, inside the data section, not overlapping any other tensor.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // as stored; [] is a scalar
  uint64_t data_begin = 0;     // byte offsets relative to the start of the data section
  uint64_t data_end = 0;
  int64_t numel() const;
  uint64_t nbytes() const { return data_end - data_begin; }
};

// Parses and validates the JSON header. `data_bytes` is the size of the data section (file size
// - 8 - header length). Returns the tensors sorted by name ("__metadata__" is skipped; it must be
// an object of strings). Never crashes on any input.
absl::StatusOr<std::vector<TensorInfo>> ParseSafetensorsHeader(std::string_view header_json,
                                                               uint64_t data_bytes);

// "[4096, 128]": shapes in error messages.
std::string ShapeString(const std::vector<int64_t>& shape);

// Converts `n` stored elements of a floating dtype (BF16, F16, F32, F8_E4M3) to float32.
// bf16: the top 16 bits of a float32; f16: IEEE half incl. subnormals, inf and nan.
float Bf16ToFloat(uint16_t bits);
float F16ToFloat(uint16_t bits);
uint16_t FloatToBf16(float f);  // round to nearest even; nan stays nan
// e4m3fn (F8_E4M3): bias 7, subnormals, no inf, 0x7f / 0xff nan; exact.
float F8E4M3ToFloat(uint8_t bits);
// InvalidArgument when `dtype` is not BF16, F16, F32 or F8_E4M3 (callers add the tensor name).
// F8_E4M3 gives the e4m3 values without any scale.
absl::Status ConvertToFloat(DType dtype, const uint8_t* src, size_t n, float* dst);

// A read-only memory map of one .safetensors file, its header parsed and validated.
class SafetensorsFile {
 public:
  // Errors name the file: "model.safetensors: truncated: header says 8192 bytes but file has 100",
  // "model.safetensors: malformed header: ...".
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const TensorInfo* Find(std::string_view name) const;                  // nullptr when absent
  // First byte of the tensor's data (inside the map; valid while this object lives).
  const uint8_t* Data(const TensorInfo& t) const { return data_ + t.data_begin; }
  uint64_t file_bytes() const { return map_bytes_; }

  // Convenience for golden files and tests: the whole tensor as float32 (BF16/F16/F32) or as
  // integers (I8/I16/I32/I64/U8/BOOL). NotFound / InvalidArgument name the tensor and file.
  absl::StatusOr<Tensor> ReadFloat(std::string_view name) const;
  absl::StatusOr<std::vector<int64_t>> ReadInts(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::vector<TensorInfo> tensors_;
};

// One tensor to write. For F32 and BF16 the values come from `floats` (BF16 rounded to nearest
// even); for I32 from `ints`. When `raw` is non-empty it is written as-is with `dtype` (any
// dtype; its size must be numel * DTypeSize) — for f16 data and hand-made test files.
struct NamedTensorData {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<float> floats;
  std::vector<int32_t> ints;
  std::string raw;
};

// Writes a .safetensors file (tensors in the given order, 8-byte aligned header, metadata
// {"format": "pt"}). Written to PATH.tmp then renamed, so a reader never sees half a file.
absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensorData>& tensors);

}  // namespace tandem::engine
