#include "engine/kv_cache.h"

#include <cmath>
#include <initializer_list>
#include <string>

#include "common/status.h"

namespace tandem::engine {

absl::StatusOr<KvDtype> ParseKvDtype(std::string_view name, KvDtype auto_dtype) {
  if (name == "auto" || name.empty()) return auto_dtype;
  if (name == "f32") return KvDtype::kF32;
  if (name == "bf16") return KvDtype::kBf16;
  if (name == "fp8" || name == "fp8_e4m3") return KvDtype::kFp8;
  return absl::InvalidArgumentError("kv cache dtype must be " + std::string(kKvDtypeNames) + ", not \"" +
                                    std::string(name) + "\"");
}

const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kBf16: return "bf16";
    case KvDtype::kFp8: return "fp8";
    case KvDtype::kF32:
    default: return "f32";
  }
}

int64_t KvDtypeBytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kBf16: return 2;
    case KvDtype::kFp8: return 1;
    case KvDtype::kF32:
    default: return 4;
  }
}

namespace {

// One scale tensor of `layer` under the first of `suffixes` the checkpoint has; 1 when none.
absl::StatusOr<float> ReadScale(const Checkpoint& ckpt, const WeightNames& names, int64_t layer,
                                std::initializer_list<const char*> suffixes) {
  for (const char* suffix : suffixes) {
    const std::string name = names.Layer(layer, suffix);
    if (!ckpt.Has(name)) continue;
    ASSIGN_OR_RETURN(const std::vector<int64_t> shape, ckpt.Shape(name));
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (numel != 1) return absl::InvalidArgumentError("kv cache scale '" + name + "' must hold one value");
    ASSIGN_OR_RETURN(const Tensor t, ckpt.Read(name, shape));
    const float v = t.data[0];
    if (!(std::isfinite(v) && v > 0.0f)) {
      return absl::InvalidArgumentError("kv cache scale '" + name + "' must be positive and finite, got " +
                                        std::to_string(v));
    }
    return v;
  }
  return 1.0f;
}

}  // namespace

absl::StatusOr<std::vector<kernels::KvScale>> ReadKvScales(const Checkpoint& ckpt, const WeightNames& names,
                                                           const ModelConfig& config) {
  std::vector<kernels::KvScale> scales;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    if (!config.IsFullAttentionLayer(l)) continue;
    kernels::KvScale s;
    ASSIGN_OR_RETURN(s.k, ReadScale(ckpt, names, l, {"self_attn.k_scale", "self_attn.k_proj.k_scale"}));
    ASSIGN_OR_RETURN(s.v, ReadScale(ckpt, names, l, {"self_attn.v_scale", "self_attn.v_proj.v_scale"}));
    scales.push_back(s);
  }
  return scales;
}

BlockAllocator::BlockAllocator(int32_t num_blocks) : num_blocks_(num_blocks), refs_(num_blocks, 0) {
  free_.reserve(num_blocks);
  // Pushed in reverse so that block 0 is handed out first.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

absl::StatusOr<int32_t> BlockAllocator::Allocate() {
  if (free_.empty()) {
    return absl::ResourceExhaustedError("kv cache full: all " + std::to_string(num_blocks_) +
                                        " blocks in use");
  }
  int32_t b = free_.back();
  free_.pop_back();
  refs_[b] = 1;
  return b;
}

void BlockAllocator::Share(int32_t block) {
  if (block >= 0 && block < num_blocks_ && refs_[block] > 0) ++refs_[block];
}

void BlockAllocator::Free(int32_t block) {
  if (block < 0 || block >= num_blocks_ || refs_[block] == 0) return;  // double free is harmless
  if (--refs_[block] == 0) free_.push_back(block);
}

void BlockAllocator::Free(const std::vector<int32_t>& blocks) {
  for (int32_t b : blocks) Free(b);
}

absl::Status EnsureBlocks(BlockAllocator& alloc, int32_t block_size, int64_t num_tokens,
                          std::vector<int32_t>& block_table) {
  while (static_cast<int64_t>(block_table.size()) * block_size < num_tokens) {
    auto b = alloc.Allocate();
    if (!b.ok()) return b.status();
    block_table.push_back(*b);
  }
  return absl::OkStatus();
}

PagedKvCache::PagedKvCache(int64_t num_layers, int32_t num_blocks, int32_t block_size, int64_t n_kv_heads,
                           int64_t head_dim, KvDtype dtype)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      token_stride_(n_kv_heads * head_dim),
      dtype_(dtype),
      k_(num_layers),
      v_(num_layers) {
  // Zero bytes are 0 in every element type.
  const int64_t bytes = static_cast<int64_t>(num_blocks) * block_size * token_stride_ * KvDtypeBytes(dtype);
  const size_t n = static_cast<size_t>((bytes + 3) / 4);
  for (int64_t l = 0; l < num_layers; ++l) {
    k_[l].assign(n, 0.0f);
    v_[l].assign(n, 0.0f);
  }
}

}  // namespace tandem::engine
