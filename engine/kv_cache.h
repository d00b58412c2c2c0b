// The paged KV cache: a pool of fixed-size blocks (block_size tokens each). A sequence's KV lives
// in the blocks of its block table: position p is in block block_table[p / block_size], slot
// p % block_size. Rank 0's BlockAllocator hands out block ids; every rank stores the same block
// ids for its own kv heads, so a step's block tables mean the same thing on every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::engine {

// What one token of KV costs on one rank (for sizing the pool from a memory budget).
struct KvCacheSpec {
  int64_t num_layers = 0;         // layers that keep KV (full-attention layers)
  int64_t num_kv_heads_local = 0; // kv heads held by this rank
  int64_t head_dim = 0;
  int64_t bytes_per_element = 4;  // float32 on the cpu backend
  // Models with per-sequence recurrent state (the hybrids' Gated DeltaNet layers): this rank's
  // bytes of one sequence's state slot (conv + recurrent state of every such layer); 0 = none.
  int64_t state_bytes_per_slot = 0;
  bool has_state() const { return state_bytes_per_slot > 0; }
  // K and V, every KV layer.
  int64_t bytes_per_token() const {
    return 2 * num_layers * num_kv_heads_local * head_dim * bytes_per_element;
  }
};

// A free list of block ids [0, num_blocks).
class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);
  // One free block; ResourceExhausted when the pool is full.
  absl::StatusOr<int32_t> Allocate();
  void Free(int32_t block);
  void Free(const std::vector<int32_t>& blocks);
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks_ - num_free(); }
  int32_t num_total() const { return num_blocks_; }

 private:
  int32_t num_blocks_;
  std::vector<int32_t> free_;     // a stack: the last freed block is reused first
  std::vector<bool> in_use_;
};

// Grows `block_table` (with blocks from `alloc`) until it covers `num_tokens` positions.
absl::Status EnsureBlocks(BlockAllocator& alloc, int32_t block_size, int64_t num_tokens,
                          std::vector<int32_t>& block_table);

// float32 K and V storage on the CPU, per layer (num_blocks, block_size, n_kv_heads_local, head_dim).
class PagedKvCache {
 public:
  PagedKvCache() = default;
  PagedKvCache(int64_t num_layers, int32_t num_blocks, int32_t block_size, int64_t n_kv_heads,
               int64_t head_dim);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  bool allocated() const { return num_blocks_ > 0; }

  // The (n_kv_heads, head_dim) K or V of one token at `pos`, in the sequence with `block_table`.
  float* key(int64_t layer, const std::vector<int32_t>& block_table, int64_t pos) {
    return k_[layer].data() + Offset(block_table, pos);
  }
  float* value(int64_t layer, const std::vector<int32_t>& block_table, int64_t pos) {
    return v_[layer].data() + Offset(block_table, pos);
  }
  // A layer's whole K or V pool (num_blocks * block_size slots, n_kv_heads, head_dim), which the
  // attention op addresses by slot (engine/cpu/ops.h).
  float* keys(int64_t layer) { return k_[layer].data(); }
  float* values(int64_t layer) { return v_[layer].data(); }

 private:
  int64_t Offset(const std::vector<int32_t>& block_table, int64_t pos) const {
    int64_t block = block_table[pos / block_size_];
    return ((block * block_size_) + pos % block_size_) * token_stride_;
  }

  int32_t num_blocks_ = 0;
  int32_t block_size_ = 0;
  int64_t token_stride_ = 0;              // n_kv_heads * head_dim
  std::vector<std::vector<float>> k_, v_; // per layer (num_blocks, block_size, n_kv_heads, head_dim)
};

}  // namespace tandem::engine
