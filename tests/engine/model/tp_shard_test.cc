// The cuda backend's tensor-parallel shard arithmetic (engine/cuda/tp_shard.h, pure C++): the same
// ranges as engine/cpu/layers.cc and cpu_model.cc take, on the tiny test model's and Qwen3-30B-A3B's
// shapes. Runs without a GPU.
#include "engine/cuda/tp_shard.h"

#include <gtest/gtest.h>

namespace tandem::engine::cuda {
namespace {

TEST(TpShard, WorldOneHoldsEverything) {
  const TpShard s = ComputeTpShard(32, 4, 6144, 768, 151936, 0, 1);
  EXPECT_EQ(s.q_head_start, 0);
  EXPECT_EQ(s.n_heads, 32);
  EXPECT_EQ(s.n_kv_heads, 4);
  EXPECT_EQ(s.inter, 6144);
  EXPECT_EQ(s.moe_inter, 768);
  EXPECT_EQ(s.vocab_per_rank, 151936);
  EXPECT_EQ(s.vocab_len, 151936);
}

TEST(TpShard, SplitsHeadsAndIntermediateEvenly) {
  // qwen3moe-tiny at TP=2: 8 q heads, 4 kv heads, moe intermediate 64, dense 256, vocab 4096.
  for (int r = 0; r < 2; ++r) {
    const TpShard s = ComputeTpShard(8, 4, 256, 64, 4096, r, 2);
    EXPECT_EQ(s.n_heads, 4);
    EXPECT_EQ(s.q_head_start, 4 * r);
    EXPECT_EQ(s.n_kv_heads, 2);
    EXPECT_EQ(s.kv_head_start, 2 * r);
    EXPECT_EQ(s.moe_inter, 32);
    EXPECT_EQ(s.moe_inter_start, 32 * r);
    EXPECT_EQ(s.inter, 128);
    EXPECT_EQ(s.inter_start, 128 * r);
    EXPECT_EQ(s.vocab_start, 2048 * r);
    EXPECT_EQ(s.vocab_len, 2048);
  }
}

TEST(TpShard, ReplicatesKvHeadsWhenFewerThanRanks) {
  // Qwen3-30B-A3B at TP=8: 32 q heads, 4 kv heads: ranks 2k and 2k+1 both hold kv head k, which
  // their q heads (4 per rank, 8 per kv head) read.
  for (int r = 0; r < 8; ++r) {
    const TpShard s = ComputeTpShard(32, 4, 6144, 768, 151936, r, 8);
    EXPECT_EQ(s.n_heads, 4);
    EXPECT_EQ(s.n_kv_heads, 1);
    EXPECT_EQ(s.kv_head_start, r / 2);
    EXPECT_EQ(s.q_head_start / (32 / 4), s.kv_head_start) << "rank " << r;
  }
}

TEST(TpShard, PadsTheLastVocabularySlice) {
  // vocab 10 over 4 ranks: 3 rows each, the last rank holds 1 real row and 2 zero rows.
  int64_t total = 0;
  for (int r = 0; r < 4; ++r) {
    const TpShard s = ComputeTpShard(4, 4, 8, 8, 10, r, 4);
    EXPECT_EQ(s.vocab_per_rank, 3);
    EXPECT_EQ(s.vocab_start, 3 * r);
    EXPECT_EQ(s.vocab_len, r < 3 ? 3 : 1);
    total += s.vocab_len;
  }
  EXPECT_EQ(total, 10);
  // vocab 5 over 4 ranks: 2 rows each; rank 3 starts past the vocabulary and holds none.
  EXPECT_EQ(ComputeTpShard(4, 4, 8, 8, 5, 3, 4).vocab_len, 0);
  EXPECT_EQ(ComputeTpShard(4, 4, 8, 8, 5, 2, 4).vocab_len, 1);
}

}  // namespace
}  // namespace tandem::engine::cuda
