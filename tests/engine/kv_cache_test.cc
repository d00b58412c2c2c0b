// The paged KV cache (engine/kv_cache.cc): the block allocator's free list (order, exhaustion,
// frees), EnsureBlocks growing a block table, and PagedKvCache's layout (a position's K and V in
// the block its table names, per layer).
#include "engine/kv_cache.h"

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

TEST(KvCache, BlockAllocator) {
  BlockAllocator alloc(3);
  EXPECT_EQ(*alloc.Allocate(), 0);
  EXPECT_EQ(*alloc.Allocate(), 1);
  EXPECT_EQ(alloc.num_used(), 2);
  std::vector<int32_t> table;
  EXPECT_TRUE(EnsureBlocks(alloc, 16, 16, table).ok());  // one block covers 16 tokens
  EXPECT_EQ(table, (std::vector<int32_t>{2}));
  auto full = alloc.Allocate();
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(EnsureBlocks(alloc, 16, 17, table).ok());
  alloc.Free(1);
  alloc.Free(1);  // double free is ignored
  EXPECT_EQ(alloc.num_free(), 1);
  EXPECT_EQ(*alloc.Allocate(), 1);
  alloc.Free(std::vector<int32_t>{0, 1, 2});
  EXPECT_EQ(alloc.num_free(), 3);
  KvCacheSpec spec{48, 2, 128, 2};
  EXPECT_EQ(spec.bytes_per_token(), 2 * 48 * 2 * 128 * 2);
}

TEST(KvCache, ExhaustionSaysSoAndFreeingRecovers) {
  BlockAllocator alloc(4);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(*alloc.Allocate());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));  // block 0 first, then in order
  EXPECT_EQ(alloc.num_free(), 0);
  EXPECT_EQ(alloc.num_total(), 4);
  auto full = alloc.Allocate();
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.status().message(), "kv cache full: all 4 blocks in use");
  // The last freed block is handed out first; ids outside the pool are ignored.
  alloc.Free(2);
  alloc.Free(0);
  alloc.Free(-1);
  alloc.Free(4);
  EXPECT_EQ(alloc.num_free(), 2);
  EXPECT_EQ(*alloc.Allocate(), 0);
  EXPECT_EQ(*alloc.Allocate(), 2);
  EXPECT_FALSE(alloc.Allocate().ok());
}

TEST(KvCache, EnsureBlocksGrowsOnlyWhatIsMissing) {
  BlockAllocator alloc(3);
  std::vector<int32_t> table;
  ASSERT_TRUE(EnsureBlocks(alloc, 4, 0, table).ok());  // nothing to cover
  EXPECT_TRUE(table.empty());
  ASSERT_TRUE(EnsureBlocks(alloc, 4, 5, table).ok());  // 5 tokens: 2 blocks of 4
  EXPECT_EQ(table, (std::vector<int32_t>{0, 1}));
  ASSERT_TRUE(EnsureBlocks(alloc, 4, 8, table).ok());  // still covered
  EXPECT_EQ(table.size(), 2u);
  // 13 tokens need 4 blocks; the pool has one more: the table keeps what it got.
  const absl::Status st = EnsureBlocks(alloc, 4, 13, table);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(alloc.num_free(), 0);
}

TEST(KvCache, PositionsMapThroughTheBlockTable) {
  PagedKvCache kv(1, 10, 4, 2, 3);  // 1 layer, 10 blocks of 4 tokens, 2 kv heads, head_dim 3
  std::vector<int32_t> table = {5, 2, 9};
  // Position 6 is block table[1] = 2, slot 2: element offset (2 * 4 + 2) * 6.
  float* k6 = kv.key(0, table, 6);
  float* k0 = kv.key(0, {0}, 0);
  EXPECT_EQ(k6 - k0, (2 * 4 + 2) * 6);
  EXPECT_EQ(kv.value(0, table, 8) - kv.value(0, {0}, 0), (9 * 4 + 0) * 6);
}

TEST(KvCache, LayersAndKeysAndValuesAreSeparateZeroedPools) {
  PagedKvCache none;
  EXPECT_FALSE(none.allocated());
  PagedKvCache kv(2, 3, 2, 1, 4);  // 2 layers, 3 blocks of 2 tokens, 1 kv head, head_dim 4
  ASSERT_TRUE(kv.allocated());
  EXPECT_EQ(kv.num_blocks(), 3);
  EXPECT_EQ(kv.block_size(), 2);
  const std::vector<int32_t> table = {2, 0};
  // Position 3 is block 0, slot 1: slot index 1 of the pool, elements [4, 8).
  float* k = kv.key(1, table, 3);
  EXPECT_EQ(k, kv.keys(1) + 4);
  EXPECT_EQ(kv.value(1, table, 3), kv.values(1) + 4);
  for (int i = 0; i < 4; ++i) k[i] = 1.0f + i;
  // Written through layer 1's K only: its V and layer 0 still read zeros.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(kv.keys(1)[4 + i], 1.0f + i);
    EXPECT_EQ(kv.values(1)[4 + i], 0.0f);
    EXPECT_EQ(kv.keys(0)[4 + i], 0.0f);
  }
  // Position 0 is block 2, slot 0: the pool's slot 4, elements [16, 20) of 24.
  EXPECT_EQ(kv.key(0, table, 0) - kv.keys(0), 16);
}

}  // namespace
}  // namespace tandem::engine
