// The tensor-parallel shard arithmetic every backend loads by (engine/model/tp_shard.h): the ranges
// of each rank on the tiny test model's and Qwen3-30B-A3B's shapes, and the divisibility errors.
#include "engine/model/tp_shard.h"

#include <gtest/gtest.h>

#include "tests/engine/model/tiny_config.h"

namespace tandem::engine {
namespace {

// The tiny model with these head counts, intermediate sizes and vocabulary (2 MoE layers).
ModelConfig Config(int64_t n_heads, int64_t n_kv_heads, int64_t intermediate, int64_t moe_intermediate,
                   int64_t vocab) {
  ModelConfig c = testing::TinyMoeConfig();
  c.num_hidden_layers = 2;
  c.num_attention_heads = n_heads;
  c.num_key_value_heads = n_kv_heads;
  c.intermediate_size = intermediate;
  c.moe_intermediate_size = moe_intermediate;
  c.vocab_size = vocab;
  return c;
}

const ModelConfig kQwen3_30B = Config(32, 4, 6144, 768, 151936);

TEST(TpShard, WorldOneHoldsEverything) {
  const TpShard s = ComputeTpShard(kQwen3_30B, 0, 1);
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
    const TpShard s = ComputeTpShard(Config(8, 4, 256, 64, 4096), r, 2);
    EXPECT_EQ(s.rank, r);
    EXPECT_EQ(s.world, 2);
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
    const TpShard s = ComputeTpShard(kQwen3_30B, r, 8);
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
    const TpShard s = ComputeTpShard(Config(4, 4, 8, 8, 10), r, 4);
    EXPECT_EQ(s.vocab_per_rank, 3);
    EXPECT_EQ(s.vocab_start, 3 * r);
    EXPECT_EQ(s.vocab_len, r < 3 ? 3 : 1);
    total += s.vocab_len;
  }
  EXPECT_EQ(total, 10);
  // vocab 5 over 4 ranks: 2 rows each; rank 3 starts past the vocabulary and holds none.
  EXPECT_EQ(ComputeTpShard(Config(4, 4, 8, 8, 5), 3, 4).vocab_len, 0);
  EXPECT_EQ(ComputeTpShard(Config(4, 4, 8, 8, 5), 2, 4).vocab_len, 1);
}

TEST(CheckTpShard, AcceptsWhatSplits) {
  for (int w : {1, 2, 4, 8}) EXPECT_TRUE(CheckTpShard(kQwen3_30B, w).ok()) << w;
  // 4 kv heads over 8 or 16 ranks: each kv head replicated on the ranks whose q heads read it.
  EXPECT_TRUE(CheckTpShard(kQwen3_30B, 16).ok());
}

TEST(CheckTpShard, NamesTheDimensionThatDoesNotSplit) {
  struct Case {
    ModelConfig config;
    int world;
    std::string want;
  };
  ModelConfig dense = Config(8, 4, 100, 64, 4096);
  dense.mlp_only_layers = {1};  // layer 1 uses intermediate_size
  ModelConfig moe_only = Config(8, 4, 100, 64, 4096);  // intermediate_size unused: no error for it
  const std::vector<Case> cases = {
      {Config(8, 4, 256, 64, 4096), 0, "tensor-parallel size must be >= 1"},
      {Config(8, 4, 256, 64, 4096), 3, "num_attention_heads (8) is not divisible by the tensor-parallel size 3"},
      {Config(12, 6, 256, 64, 4096), 4,
       "num_key_value_heads (6) and the tensor-parallel size 4 must divide one another"},
      {Config(8, 0, 256, 64, 4096), 1, "num_key_value_heads (0) and the tensor-parallel size 1 must divide"},
      {Config(8, 3, 256, 64, 4096), 1, "num_attention_heads 8 is not a multiple of num_key_value_heads 3"},
      {Config(8, 4, 256, 60, 4096), 8, "moe_intermediate_size (60) is not divisible by the tensor-parallel size 8"},
      {dense, 8, "intermediate_size (100) is not divisible by the tensor-parallel size 8"},
  };
  for (const auto& c : cases) {
    const absl::Status st = CheckTpShard(c.config, c.world);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_NE(std::string(st.message()).find(c.want), std::string::npos) << st.message();
  }
  EXPECT_TRUE(CheckTpShard(moe_only, 8).ok());
}


// The hybrid shapes (Qwen3.5-35B-A3B: 16 key heads, 32 value heads, shared expert 512): the linear
// key heads split with their value heads, the shared expert's rows split like the experts', and
// the errors name the hybrid dimensions.
ModelConfig Hybrid(int64_t linear_k, int64_t linear_v, int64_t shared) {
  ModelConfig c = Config(16, 2, 0, 512, 248320);
  c.model_type = "qwen3_5_moe_text";
  c.layer_types = {"linear_attention", "full_attention"};
  c.linear_num_key_heads = linear_k;
  c.linear_num_value_heads = linear_v;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  c.shared_expert_intermediate_size = shared;
  return c;
}

TEST(TpShard, SplitsLinearHeadsAndTheSharedExpert) {
  const ModelConfig c = Hybrid(16, 32, 512);
  const TpShard s = ComputeTpShard(c, 3, 4);
  EXPECT_EQ(s.n_linear_k_heads, 4);
  EXPECT_EQ(s.linear_k_head_start, 12);
  EXPECT_EQ(s.n_linear_v_heads, 8);
  EXPECT_EQ(s.linear_v_head_start, 24);
  EXPECT_EQ(s.shared_inter, 128);
  EXPECT_EQ(s.shared_inter_start, 384);
  for (int w : {1, 2, 4, 8, 16}) EXPECT_TRUE(CheckTpShard(c, w).ok()) << w;
  const absl::Status heads = CheckTpShard(Hybrid(6, 12, 512), 4);
  EXPECT_EQ(std::string(heads.message()), "linear_num_key_heads (6) is not divisible by the tensor-parallel size 4");
  const absl::Status shared = CheckTpShard(Hybrid(16, 32, 100), 8);
  EXPECT_EQ(std::string(shared.message()),
            "shared_expert_intermediate_size (100) is not divisible by the tensor-parallel size 8");
  // No linear-attention layer: its head count does not matter.
  ModelConfig full = Hybrid(6, 12, 512);
  full.layer_types = {"full_attention", "full_attention"};
  EXPECT_TRUE(CheckTpShard(full, 4).ok());
}

}  // namespace
}  // namespace tandem::engine
