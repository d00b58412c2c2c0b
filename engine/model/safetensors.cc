#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "kernels/quant_weight.h"
#include "nlohmann/json.hpp"

namespace tandem::engine {
namespace {

using nlohmann::json;

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::kBF16, "BF16", 2}, {DType::kF16, "F16", 2},  {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},   {DType::kI8, "I8", 1},    {DType::kI16, "I16", 2},
    {DType::kI32, "I32", 4},   {DType::kI64, "I64", 8},  {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1}, {DType::kF8E4M3, "F8_E4M3", 1},
};

std::string Basename(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// Reads a non-negative JSON integer that fits in int64 (shapes and offsets).
absl::StatusOr<uint64_t> NonNegativeInt(const json& v, const std::string& what) {
  if (v.is_number_unsigned()) {
    uint64_t x = v.get<uint64_t>();
    if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is too large: ", x));
    }
    return x;
  }
  if (v.is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is negative: ", v.get<int64_t>()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be a non-negative integer, found ", v.dump()));
}

absl::StatusOr<TensorInfo> ParseEntry(const std::string& name, const json& e, uint64_t data_bytes) {
  const std::string where = absl::StrCat("tensor '", name, "'");
  if (!e.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": entry must be an object"));
  }
  TensorInfo t;
  t.name = name;

  auto dt = e.find("dtype");
  if (dt == e.end()) return absl::InvalidArgumentError(absl::StrCat(where, ": missing 'dtype'"));
  if (!dt->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": 'dtype' must be a string"));
  }
  auto dtype = DTypeFromName(dt->get_ref<const std::string&>());
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported dtype ", dt->get<std::string>(),
                                                   " for tensor ", name));
  }
  t.dtype = *dtype;

  auto sh = e.find("shape");
  if (sh == e.end()) return absl::InvalidArgumentError(absl::StrCat(where, ": missing 'shape'"));
  if (!sh->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": 'shape' must be an array"));
  }
  uint64_t numel = 1;
  for (size_t i = 0; i < sh->size(); ++i) {
    ASSIGN_OR_RETURN(uint64_t d, NonNegativeInt((*sh)[i], absl::StrCat(where, ": shape[", i, "]")));
    if (__builtin_mul_overflow(numel, d, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": shape ", sh->dump(), " has too many elements"));
    }
    t.shape.push_back(static_cast<int64_t>(d));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(DTypeSize(t.dtype)), &nbytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": shape ", sh->dump(), " has too many bytes"));
  }

  auto off = e.find("data_offsets");
  if (off == e.end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing 'data_offsets'"));
  }
  if (!off->is_array() || off->size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": 'data_offsets' must be [begin, end], found ", off->dump()));
  }
  ASSIGN_OR_RETURN(t.data_begin, NonNegativeInt((*off)[0], where + ": data_offsets[0]"));
  ASSIGN_OR_RETURN(t.data_end, NonNegativeInt((*off)[1], where + ": data_offsets[1]"));
  if (t.data_end < t.data_begin) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": data_offsets [", t.data_begin, ", ",
                                                   t.data_end, "] end before they begin"));
  }
  if (t.data_end - t.data_begin != nbytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": data_offsets [", t.data_begin, ", ", t.data_end, "] hold ",
        t.data_end - t.data_begin, " bytes but ", DTypeName(t.dtype), " ",
        ShapeString(t.shape), " needs ", nbytes));
  }
  if (t.data_end > data_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "truncated: tensor '", name, "' ends at byte ", t.data_end,
        " of the data section, which has only ", data_bytes, " bytes"));
  }
  return t;
}

}  // namespace

const char* DTypeName(DType t) {
  for (const auto& e : kDTypes) {
    if (e.dtype == t) return e.name;
  }
  return "?";
}

size_t DTypeSize(DType t) {
  for (const auto& e : kDTypes) {
    if (e.dtype == t) return e.size;
  }
  return 0;
}

absl::StatusOr<DType> DTypeFromName(std::string_view name) {
  for (const auto& e : kDTypes) {
    if (name == e.name) return e.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported dtype ", AsAbsl(name)));
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<std::vector<TensorInfo>> ParseSafetensorsHeader(std::string_view header_json,
                                                               uint64_t data_bytes) {
  // nlohmann::json throws; this is the one place that calls it for headers.
  json root;
  try {
    root = json::parse(header_json.begin(), header_json.end());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed header: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError("malformed header: the header must be a JSON object");
  }
  std::vector<TensorInfo> tensors;
  tensors.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) {
        return absl::InvalidArgumentError("malformed header: __metadata__ must be an object");
      }
      for (const auto& [k, v] : it->items()) {
        if (!v.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat("malformed header: __metadata__ value of '", k, "' must be a string"));
        }
      }
      continue;
    }
    auto t = ParseEntry(it.key(), *it, data_bytes);
    if (!t.ok()) {
      std::string msg(t.status().message());
      // Keep "truncated: ..." and "unsupported dtype ..." recognisable; everything else is a
      // malformed header.
      if (msg.rfind("truncated", 0) != 0 && msg.rfind("unsupported dtype", 0) != 0) {
        msg = "malformed header: " + msg;
      }
      return absl::InvalidArgumentError(msg);
    }
    tensors.push_back(std::move(*t));
  }
  // No two tensors may share bytes (empty tensors own none).
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors) {
    if (t.nbytes() > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->data_begin < b->data_begin;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (b.data_begin < a.data_end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "malformed header: tensors '", a.name, "' [", a.data_begin, ", ", a.data_end,
          ") and '", b.name, "' [", b.data_begin, ", ", b.data_end, ") overlap"));
    }
  }
  // json objects iterate in key order already; sort anyway so the contract does not depend on it.
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return tensors;
}

// bf16 is the top half of a float32, so widening is a shift.
float Bf16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
float F16ToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exp = (bits >> 10) & 0x1f;
  const uint32_t mant = bits & 0x3ff;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);  // inf (mant 0) or nan (payload kept)
  } else if (exp != 0) {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;  // +-0
  } else {
    // Subnormal: value = mant * 2^-24; exact in float32.
    float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float F8E4M3ToFloat(uint8_t bits) { return kernels::E4m3ToFloat(bits); }

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((u >> 16) | 0x0040);  // quiet nan, never rounds to inf
  }
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate.
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

absl::Status ConvertToFloat(DType dtype, const uint8_t* src, size_t n, float* dst) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return absl::OkStatus();
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        dst[i] = Bf16ToFloat(b);
      }
      return absl::OkStatus();
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        dst[i] = F16ToFloat(b);
      }
      return absl::OkStatus();
    case DType::kF8E4M3:
      for (size_t i = 0; i < n; ++i) dst[i] = F8E4M3ToFloat(src[i]);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat("dtype ", DTypeName(dtype),
                                                     " cannot be read as float (BF16, F16, F32, F8_E4M3 only)"));
  }
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const std::string name = Basename(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat(path, ": fstat: ", std::strerror(err)));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": truncated: file has ", size, " bytes, less than the 8-byte header length"));
  }
  // MAP_PRIVATE + PROT_READ: the weights are never written, and a private map cannot change
  // under us through our own process. The fd can be closed once mapped.
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::InternalError(absl::StrCat(path, ": mmap: ", std::strerror(map_err)));
  }
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = map;
  f->map_bytes_ = size;
  const auto* bytes = static_cast<const uint8_t*>(map);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": malformed header: header length ", header_len,
                     " exceeds the limit of ", kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (header_len > size - 8) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": truncated: header says ", header_len,
                                                   " bytes but file has ", size));
  }
  // Loading reads (nearly) every page once; ask the kernel to start reading ahead now.
  ::madvise(map, size, MADV_WILLNEED);
  std::string_view header(reinterpret_cast<const char*>(bytes + 8), header_len);
  auto tensors = ParseSafetensorsHeader(header, size - 8 - header_len);
  if (!tensors.ok()) {
    return absl::Status(tensors.status().code(),
                        absl::StrCat(name, ": ", tensors.status().message()));
  }
  f->tensors_ = std::move(*tensors);
  f->data_ = bytes + 8 + header_len;
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

absl::StatusOr<Tensor> SafetensorsFile::ReadFloat(std::string_view name) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("tensor '", AsAbsl(name), "' not found in ", path_));
  }
  Tensor out;
  out.shape = t->shape;
  out.data.resize(static_cast<size_t>(t->numel()));
  absl::Status st = ConvertToFloat(t->dtype, Data(*t), out.data.size(), out.data.data());
  if (!st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", t->name, "' in ", path_, ": ", st.message()));
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> SafetensorsFile::ReadInts(std::string_view name) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("tensor '", AsAbsl(name), "' not found in ", path_));
  }
  const size_t n = static_cast<size_t>(t->numel());
  const uint8_t* p = Data(*t);
  std::vector<int64_t> out(n);
  auto load = [&](auto sample) {
    using T = decltype(sample);
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, p + i * sizeof(T), sizeof(T));
      out[i] = static_cast<int64_t>(v);
    }
  };
  switch (t->dtype) {
    case DType::kI8: load(int8_t{}); break;
    case DType::kI16: load(int16_t{}); break;
    case DType::kI32: load(int32_t{}); break;
    case DType::kI64: load(int64_t{}); break;
    case DType::kU8:
    case DType::kBool: load(uint8_t{}); break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t->name, "' in ", path_,
                                                     ": dtype ", DTypeName(t->dtype),
                                                     " is not an integer type"));
  }
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensorData>& tensors) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || header.contains(t.name)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad or duplicate tensor name '",
                                                     t.name, "'"));
    }
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat(t.name, ": negative dimension"));
      numel *= d;
    }
    const uint64_t begin = data.size();
    if (!t.raw.empty() || (numel == 0 && t.floats.empty() && t.ints.empty())) {
      if (t.raw.size() != static_cast<size_t>(numel) * DTypeSize(t.dtype)) {
        return absl::InvalidArgumentError(absl::StrCat(
            t.name, ": raw data has ", t.raw.size(), " bytes, shape needs ",
            static_cast<size_t>(numel) * DTypeSize(t.dtype)));
      }
      data += t.raw;
    } else if (t.dtype == DType::kF32 || t.dtype == DType::kBF16) {
      if (t.floats.size() != static_cast<size_t>(numel)) {
        return absl::InvalidArgumentError(absl::StrCat(t.name, ": ", t.floats.size(),
                                                       " floats for shape ", ShapeString(t.shape)));
      }
      if (t.dtype == DType::kF32) {
        data.append(reinterpret_cast<const char*>(t.floats.data()), t.floats.size() * 4);
      } else {
        for (float v : t.floats) {
          uint16_t b = FloatToBf16(v);
          data.append(reinterpret_cast<const char*>(&b), 2);
        }
      }
    } else if (t.dtype == DType::kI32) {
      if (t.ints.size() != static_cast<size_t>(numel)) {
        return absl::InvalidArgumentError(absl::StrCat(t.name, ": ", t.ints.size(),
                                                       " ints for shape ", ShapeString(t.shape)));
      }
      data.append(reinterpret_cast<const char*>(t.ints.data()), t.ints.size() * 4);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          t.name, ": the writer converts only F32, BF16 and I32 (pass `raw` bytes for ",
          DTypeName(t.dtype), ")"));
    }
    header[t.name] = {{"dtype", DTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {begin, static_cast<uint64_t>(data.size())}}};
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned (as the reference writer does).
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  }
  bool ok = std::fwrite(len, 1, 8, f) == 8 &&
            std::fwrite(text.data(), 1, text.size(), f) == text.size() &&
            std::fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat(tmp, ": write failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": rename failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine
