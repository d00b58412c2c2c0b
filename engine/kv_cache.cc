#include "engine/kv_cache.h"

#include <string>

namespace tandem::engine {

BlockAllocator::BlockAllocator(int32_t num_blocks) : num_blocks_(num_blocks), in_use_(num_blocks, false) {
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
  in_use_[b] = true;
  return b;
}

void BlockAllocator::Free(int32_t block) {
  if (block < 0 || block >= num_blocks_ || !in_use_[block]) return;  // double free is harmless
  in_use_[block] = false;
  free_.push_back(block);
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

PagedKvCache::PagedKvCache(int64_t num_layers, int32_t num_blocks, int32_t block_size,
                           int64_t n_kv_heads, int64_t head_dim)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      token_stride_(n_kv_heads * head_dim),
      k_(num_layers),
      v_(num_layers) {
  size_t n = static_cast<size_t>(num_blocks) * block_size * token_stride_;
  for (int64_t l = 0; l < num_layers; ++l) {
    k_[l].assign(n, 0.0f);
    v_[l].assign(n, 0.0f);
  }
}

}  // namespace tandem::engine
