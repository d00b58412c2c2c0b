// Checkpoint over one folder of .safetensors files (see checkpoint.h for the accepted layouts).
#include "engine/model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/model/safetensors.h"
#include "nlohmann/json.hpp"

namespace tandem::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kIndexFile[] = "model.safetensors.index.json";
constexpr char kSingleFile[] = "model.safetensors";

// The entry and slice of a ReadIndexedSlice exist in `shape`.
absl::Status CheckIndexedSlice(const std::string& name, const std::vector<int64_t>& shape,
                               int64_t index, int dim, int64_t start, int64_t len) {
  if (shape.size() < 2 || index < 0 || index >= shape[0] || dim < 1 ||
      dim >= static_cast<int>(shape.size()) || start < 0 || len < 0 || start > shape[dim] ||
      len > shape[dim] - start) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': slice [", start, ", ",
                                                   start + len, ") of dim ", dim, " of entry ",
                                                   index, " out of range for shape ",
                                                   ShapeString(shape)));
  }
  return absl::OkStatus();
}

class SafetensorsCheckpoint final : public Checkpoint {
 public:
  SafetensorsCheckpoint(std::string dir, LoadProgress* progress) : dir_(std::move(dir)), progress_(progress) {}

  // The totals the progress is measured against, once the folder is open.
  void SetProgressTotals() {
    if (!progress_) return;
    int64_t bytes = 0;
    for (const auto& [name, loc] : where_) bytes += static_cast<int64_t>(loc.info->nbytes());
    // Ranks of one process share a LoadProgress: each adds the tensors it will read, while the
    // stored bytes are the model's once (the ranks' shards add up to them).
    progress_->bytes_total = bytes;
    progress_->tensors_total += static_cast<int64_t>(where_.size());
  }

  // Opens `file` (relative to the folder) unless already open; returns its index in files_.
  absl::StatusOr<size_t> AddFile(const std::string& file) {
    for (size_t i = 0; i < file_names_.size(); ++i) {
      if (file_names_[i] == file) return i;
    }
    ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open((fs::path(dir_) / file).string()));
    files_.push_back(std::move(f));
    file_names_.push_back(file);
    return files_.size() - 1;
  }

  // Registers every tensor of files_[i]; a name in two files is an error naming both.
  absl::Status IndexFile(size_t i) {
    for (const TensorInfo& t : files_[i]->tensors()) {
      auto [it, inserted] = where_.emplace(t.name, Location{i, &t});
      if (!inserted && it->second.file != i) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", t.name, "' appears in both ", file_names_[it->second.file],
                         " and ", file_names_[i], " in ", dir_));
      }
    }
    return absl::OkStatus();
  }

  absl::Status OpenIndexed() {
    const std::string index_path = (fs::path(dir_) / kIndexFile).string();
    std::ifstream in(index_path);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return absl::PermissionDeniedError(absl::StrCat(index_path, ": cannot read"));
    }
    json index;
    try {
      index = json::parse(ss.str());
    } catch (const json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": malformed JSON: ", e.what()));
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": missing the 'weight_map' object"));
    }
    // Shard names first, so a missing shard is reported before any tensor.
    std::map<std::string, std::vector<std::string>> tensors_by_shard;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            index_path, ": weight_map entry for '", name, "' must be a file name"));
      }
      const std::string& file = shard.get_ref<const std::string&>();
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        return absl::InvalidArgumentError(absl::StrCat(
            index_path, ": weight_map entry for '", name, "' is not a plain file name: '", file, "'"));
      }
      tensors_by_shard[file].push_back(name);
    }
    for (const auto& [file, names] : tensors_by_shard) {
      if (!fs::exists(fs::path(dir_) / file)) {
        return absl::NotFoundError(absl::StrCat("shard ", file, " listed in ", index_path,
                                                " (for tensor '", names.front(),
                                                "' and others) does not exist"));
      }
    }
    for (const auto& [file, names] : tensors_by_shard) {
      ASSIGN_OR_RETURN(size_t i, AddFile(file));
      RETURN_IF_ERROR(IndexFile(i));
      for (const std::string& name : names) {
        if (files_[i]->Find(name) == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' is listed in ",
                                                         kIndexFile, " for shard ", file,
                                                         " but that shard does not hold it"));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status OpenFolder() {
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) {
      return absl::NotFoundError(absl::StrCat("checkpoint folder ", dir_, " does not exist"));
    }
    if (fs::exists(fs::path(dir_) / kIndexFile)) return OpenIndexed();
    std::vector<std::string> files;
    if (fs::exists(fs::path(dir_) / kSingleFile)) {
      // One model.safetensors wins over other *.safetensors (e.g. golden.safetensors in testdata).
      files.push_back(kSingleFile);
    } else {
      for (const auto& e : fs::directory_iterator(dir_, ec)) {
        if (e.is_regular_file() && e.path().extension() == ".safetensors") {
          files.push_back(e.path().filename().string());
        }
      }
      std::sort(files.begin(), files.end());
    }
    if (files.empty()) {
      return absl::NotFoundError(absl::StrCat("no ", kIndexFile, ", ", kSingleFile,
                                              " or other *.safetensors in ", dir_));
    }
    for (const std::string& f : files) {
      ASSIGN_OR_RETURN(size_t i, AddFile(f));
      RETURN_IF_ERROR(IndexFile(i));
    }
    return absl::OkStatus();
  }

  bool Has(const std::string& name) const override { return where_.count(name) > 0; }

  absl::StatusOr<std::vector<int64_t>> Shape(const std::string& name) const override {
    ASSIGN_OR_RETURN(const TensorInfo* t, Lookup(name));
    return t->shape;
  }

  absl::StatusOr<Tensor> Read(const std::string& name,
                              const std::vector<int64_t>& expected_shape) const override {
    ASSIGN_OR_RETURN(const Location* loc, Checked(name, expected_shape));
    return ReadSliceUnchecked(*loc, 0, 0, loc->info->shape.empty() ? 1 : loc->info->shape[0]);
  }

  absl::StatusOr<Tensor> ReadSlice(const std::string& name,
                                   const std::vector<int64_t>& expected_shape, int dim,
                                   int64_t start, int64_t len) const override {
    ASSIGN_OR_RETURN(const Location* loc, Checked(name, expected_shape));
    const auto& shape = loc->info->shape;
    if (dim < 0 || dim >= static_cast<int>(shape.size())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': slice dim ", dim,
                                                     " out of range for shape ",
                                                     ShapeString(shape)));
    }
    if (start < 0 || len < 0 || start > shape[dim] || len > shape[dim] - start) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': slice [", start, ", ",
                                                     start + len, ") of dim ", dim,
                                                     " out of range for shape ",
                                                     ShapeString(shape)));
    }
    return ReadSliceUnchecked(*loc, dim, start, len);
  }

  absl::StatusOr<Tensor> ReadIndexedSlice(const std::string& name,
                                          const std::vector<int64_t>& expected_shape, int64_t index,
                                          int dim, int64_t start, int64_t len) const override {
    ASSIGN_OR_RETURN(const Location* loc, Checked(name, expected_shape));
    const auto& shape = loc->info->shape;
    RETURN_IF_ERROR(CheckIndexedSlice(name, shape, index, dim, start, len));
    return ReadSliceUnchecked(*loc, dim, start, len, index);
  }

  std::vector<std::string> Names() const override {
    std::vector<std::string> names;
    names.reserve(where_.size());
    for (const auto& [name, loc] : where_) names.push_back(name);
    return names;  // std::map iterates sorted
  }

  absl::StatusOr<TensorView> View(const std::string& name) const override {
    auto it = where_.find(name);
    if (it == where_.end()) return NotFound(name);
    const Location& loc = it->second;
    TensorView v;
    v.dtype = loc.info->dtype;
    v.shape = loc.info->shape;
    v.data = files_[loc.file]->Data(*loc.info);
    v.nbytes = loc.info->nbytes();
    v.file = files_[loc.file]->path();
    Count(loc, v.nbytes);
    return v;
  }

 private:
  struct Location {
    size_t file;
    const TensorInfo* info;  // owned by files_[file]
  };

  // A read for the progress line: `bytes` stored bytes of `loc`, the tensor once.
  void Count(const Location& loc, uint64_t bytes) const {
    if (!progress_) return;
    progress_->bytes_read += static_cast<int64_t>(bytes);
    std::lock_guard<std::mutex> lock(counted_mu_);
    if (counted_.insert(loc.info).second) ++progress_->tensors_read;
  }

  absl::Status NotFound(const std::string& name) const {
    return absl::NotFoundError(absl::StrCat("tensor '", name, "' not found in ", dir_));
  }

  absl::StatusOr<const TensorInfo*> Lookup(const std::string& name) const {
    auto it = where_.find(name);
    if (it == where_.end()) return NotFound(name);
    return it->second.info;
  }

  // The tensor exists, has `expected` shape and a dtype we convert to float.
  absl::StatusOr<const Location*> Checked(const std::string& name,
                                          const std::vector<int64_t>& expected) const {
    auto it = where_.find(name);
    if (it == where_.end()) return NotFound(name);
    const Location& loc = it->second;
    if (loc.info->shape != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' in ", file_names_[loc.file], ": expected shape ",
          ShapeString(expected), ", found ", ShapeString(loc.info->shape)));
    }
    const DType dt = loc.info->dtype;
    if (dt == DType::kF8E4M3) {
      // FP8 values mean nothing without their block scales: never hand them out alone.
      const std::string scale = WeightScaleInvName(name);
      if (!Has(scale)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' in ", file_names_[loc.file],
                                                       " is F8_E4M3 but has no '", scale, "' beside it"));
      }
    } else if (dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' in ", file_names_[loc.file], ": dtype ", DTypeName(dt),
          " cannot be read as float (BF16, F16, F32, F8_E4M3 with its scale only)"));
    }
    return &loc;
  }

  // Rows [start, start+len) of `dim`: the tensor is `outer` blocks of shape[dim] * inner
  // elements; from each block we copy one contiguous run of len * inner elements.
  // With index >= 0 (dim >= 1): the same within the sub-tensor `index` of dim 0, whose shape
  // (the stored one less dim 0) the result has.
  absl::StatusOr<Tensor> ReadSliceUnchecked(const Location& loc, int dim, int64_t start,
                                            int64_t len, int64_t index = -1) const {
    const TensorInfo& t = *loc.info;
    Tensor out;
    out.shape = t.shape;
    if (t.shape.empty()) {  // scalar
      Count(loc, DTypeSize(t.dtype));
      out.data.resize(1);
      RETURN_IF_ERROR(ConvertToFloat(t.dtype, files_[loc.file]->Data(t), 1, out.data.data()));
      return out;
    }
    out.shape[dim] = len;
    const int first = index >= 0 ? 1 : 0;  // the dims the slice lives in start here
    if (index >= 0) out.shape.erase(out.shape.begin());
    int64_t outer = 1, inner = 1, sub = 1;
    for (int i = first; i < dim; ++i) outer *= t.shape[i];
    for (size_t i = dim + 1; i < t.shape.size(); ++i) inner *= t.shape[i];
    for (size_t i = 1; i < t.shape.size(); ++i) sub *= t.shape[i];
    out.data.resize(static_cast<size_t>(outer * len * inner));
    const size_t esize = DTypeSize(t.dtype);
    Count(loc, out.data.size() * esize);
    const uint8_t* base = files_[loc.file]->Data(t) +
                          (index >= 0 ? static_cast<size_t>(index * sub) * esize : 0);
    const int64_t run = len * inner;
    for (int64_t o = 0; o < outer; ++o) {
      const uint8_t* src = base + static_cast<size_t>((o * t.shape[dim] + start) * inner) * esize;
      RETURN_IF_ERROR(ConvertToFloat(t.dtype, src, static_cast<size_t>(run),
                                     out.data.data() + o * run));
    }
    return out;
  }

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> file_names_;  // relative to dir_, parallel to files_
  std::map<std::string, Location> where_;
  LoadProgress* progress_ = nullptr;  // optional
  mutable std::mutex counted_mu_;
  mutable std::set<const TensorInfo*> counted_;  // the tensors read at least once
};

}  // namespace

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<Tensor> Checkpoint::ReadIndexedSlice(const std::string& name,
                                                    const std::vector<int64_t>& expected_shape,
                                                    int64_t index, int dim, int64_t start,
                                                    int64_t len) const {
  RETURN_IF_ERROR(CheckIndexedSlice(name, expected_shape, index, dim, start, len));
  ASSIGN_OR_RETURN(Tensor whole, ReadSlice(name, expected_shape, 0, index, 1));
  Tensor out;
  out.shape.assign(expected_shape.begin() + 1, expected_shape.end());
  out.shape[dim - 1] = len;
  int64_t outer = 1, inner = 1;
  for (int i = 1; i < dim; ++i) outer *= expected_shape[i];
  for (size_t i = dim + 1; i < expected_shape.size(); ++i) inner *= expected_shape[i];
  out.data.reserve(static_cast<size_t>(outer * len * inner));
  for (int64_t o = 0; o < outer; ++o) {
    const float* src = whole.data.data() + (o * expected_shape[dim] + start) * inner;
    out.data.insert(out.data.end(), src, src + len * inner);
  }
  return out;
}

std::string WeightScaleInvName(const std::string& weight) { return weight + "_scale_inv"; }

absl::StatusOr<TensorView> Checkpoint::View(const std::string& name) const {
  return absl::UnimplementedError("this checkpoint has no stored bytes to view");
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir, LoadProgress* progress) {
  auto ckpt = std::make_unique<SafetensorsCheckpoint>(dir, progress);
  RETURN_IF_ERROR(ckpt->OpenFolder());
  ckpt->SetProgressTotals();
  return std::unique_ptr<Checkpoint>(std::move(ckpt));
}

}  // namespace tandem::engine
