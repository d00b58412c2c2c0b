// The paged KV cache: a pool of fixed-size blocks (block_size tokens each). A sequence's KV lives
// in the blocks of its block table: position p is in block block_table[p / block_size], slot
// p % block_size. Rank 0's BlockAllocator hands out block ids; every rank stores the same block
// ids for its own kv heads, so a step's block tables mean the same thing on every rank.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_names.h"
#include "kernels/fp8.h"

namespace tandem::engine {

// The KV cache's element type, the same choice on both backends: float32 (exact), bf16 (half the
// bytes) or fp8 (e4m3 with a per-layer scale, kernels/fp8.h: a quarter of float32, half of bf16).
enum class KvDtype : uint8_t { kF32, kBf16, kFp8 };

// "auto" (the backend's own default, `auto_dtype`), "f32", "bf16", "fp8" (or vLLM's "fp8_e4m3");
// InvalidArgument naming the accepted values otherwise.
absl::StatusOr<KvDtype> ParseKvDtype(std::string_view name, KvDtype auto_dtype);
inline constexpr char kKvDtypeNames[] = "auto, f32, bf16 or fp8";
const char* KvDtypeName(KvDtype dtype);  // "f32", "bf16", "fp8"
int64_t KvDtypeBytes(KvDtype dtype);     // 4, 2, 1

// The scales of the FP8 KV cache, one per full-attention layer in order (the KV layers): the
// checkpoint's per-layer `self_attn.k_scale` / `self_attn.v_scale` (vLLM's names; ModelOpt's
// `self_attn.k_proj.k_scale` / `self_attn.v_proj.v_scale` too), 1 where it has none. A scale that
// is not one positive finite value is refused naming the tensor.
absl::StatusOr<std::vector<kernels::KvScale>> ReadKvScales(const Checkpoint& ckpt, const WeightNames& names,
                                                           const ModelConfig& config);

// What one token of KV costs on one rank (for sizing the pool from a memory budget).
struct KvCacheSpec {
  int64_t num_layers = 0;         // layers that keep KV (full-attention layers)
  int64_t num_kv_heads_local = 0; // kv heads held by this rank
  int64_t head_dim = 0;
  int64_t bytes_per_element = 4;  // KvDtypeBytes(dtype)
  // Models with per-sequence recurrent state (the hybrids' Gated DeltaNet layers): this rank's
  // bytes of one sequence's state slot (conv + recurrent state of every such layer); 0 = none.
  int64_t state_bytes_per_slot = 0;
  KvDtype dtype = KvDtype::kF32;  // the element type (last: the fields above are set in order)
  bool has_state() const { return state_bytes_per_slot > 0; }
  // K and V, every KV layer.
  int64_t bytes_per_token() const {
    return 2 * num_layers * num_kv_heads_local * head_dim * bytes_per_element;
  }
};

// A free list of block ids [0, num_blocks), with a reference count per block: sequences that
// share a prefix (the choices of one request) hold the same blocks, and a block is free again
// when its last holder frees it.
class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);
  // One free block, held once; ResourceExhausted when the pool is full.
  absl::StatusOr<int32_t> Allocate();
  // One more holder of a block in use (ignored for a free or unknown block).
  void Share(int32_t block);
  // One holder fewer; the block is free when none is left (freeing a free block is harmless).
  void Free(int32_t block);
  void Free(const std::vector<int32_t>& blocks);
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks_ - num_free(); }
  int32_t num_total() const { return num_blocks_; }
  int32_t holders(int32_t block) const { return block >= 0 && block < num_blocks_ ? refs_[block] : 0; }

 private:
  int32_t num_blocks_;
  std::vector<int32_t> free_;     // a stack: the last freed block is reused first
  std::vector<int32_t> refs_;     // holders per block; 0 = free
};

// Grows `block_table` (with blocks from `alloc`) until it covers `num_tokens` positions.
absl::Status EnsureBlocks(BlockAllocator& alloc, int32_t block_size, int64_t num_tokens,
                          std::vector<int32_t>& block_table);

// K and V storage on the CPU, per layer (num_blocks, block_size, n_kv_heads_local, head_dim) of
// float32, bf16 (kernels::bf16_bits) or fp8 (kernels::fp8_e4m3); the accessors take that type.
class PagedKvCache {
 public:
  PagedKvCache() = default;
  PagedKvCache(int64_t num_layers, int32_t num_blocks, int32_t block_size, int64_t n_kv_heads, int64_t head_dim,
               KvDtype dtype = KvDtype::kF32);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  KvDtype dtype() const { return dtype_; }
  bool allocated() const { return num_blocks_ > 0; }

  // The (n_kv_heads, head_dim) K or V of one token at `pos`, in the sequence with `block_table`.
  template <typename KV = float>
  KV* key(int64_t layer, const std::vector<int32_t>& block_table, int64_t pos) {
    return keys<KV>(layer) + Offset(block_table, pos);
  }
  template <typename KV = float>
  KV* value(int64_t layer, const std::vector<int32_t>& block_table, int64_t pos) {
    return values<KV>(layer) + Offset(block_table, pos);
  }
  // A layer's whole K or V pool (num_blocks * block_size slots, n_kv_heads, head_dim), which the
  // attention op addresses by slot (engine/cpu/ops.h). KV must be the element type of dtype().
  template <typename KV = float>
  KV* keys(int64_t layer) {
    return reinterpret_cast<KV*>(k_[layer].data());
  }
  template <typename KV = float>
  KV* values(int64_t layer) {
    return reinterpret_cast<KV*>(v_[layer].data());
  }

 private:
  int64_t Offset(const std::vector<int32_t>& block_table, int64_t pos) const {
    int64_t block = block_table[pos / block_size_];
    return ((block * block_size_) + pos % block_size_) * token_stride_;
  }

  int32_t num_blocks_ = 0;
  int32_t block_size_ = 0;
  int64_t token_stride_ = 0;  // n_kv_heads * head_dim
  KvDtype dtype_ = KvDtype::kF32;
  // Per layer, the elements' bytes; held as floats so that every element type is aligned.
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace tandem::engine
