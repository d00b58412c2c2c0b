// What each part reads on a rank (engine/model/layer_weights.h): the tensor names, stored shapes
// and slices of every weight of the tiny model's shapes at TP 1 and 2, dense and MoE layers.
#include "engine/model/layer_weights.h"

#include <gtest/gtest.h>

#include "tests/engine/model/tiny_config.h"

namespace tandem::engine {
namespace {

// The tiny model's shapes with 2 layers (the second dense) and 3 experts.
ModelConfig Tiny() {
  ModelConfig c = testing::TinyMoeConfig();
  c.num_hidden_layers = 2;
  c.num_experts = 3;
  c.num_experts_per_tok = 2;
  c.mlp_only_layers = {1};
  return c;
}

void ExpectSlice(const WeightSlice& s, const std::string& name, std::vector<int64_t> shape, int dim, int64_t start,
                 int64_t len) {
  EXPECT_EQ(s.name, name);
  EXPECT_EQ(s.shape, shape) << name;
  EXPECT_EQ(s.dim, dim) << name;
  EXPECT_EQ(s.start, start) << name;
  EXPECT_EQ(s.len, len) << name;
}

int64_t SlicesNumel(const WeightSpec& w) {
  int64_t n = 0;
  for (const auto& s : w.slices) n += s.numel();
  return n;
}

TEST(LayerWeights, AttentionPacksThisRanksQkvRows) {
  const ModelConfig c = Tiny();
  const WeightNames names{"model.", false};
  // Rank 1 of 2: q heads 4..7 (rows 128..255), kv heads 2..3 (rows 64..127), o_proj columns 128..255.
  const AttentionWeightSpec a = DescribeAttention(names, c, ComputeTpShard(c, 1, 2), 0);
  EXPECT_EQ(a.wqkv.shape, (std::vector<int64_t>{128 + 2 * 64, 128}));
  ASSERT_EQ(a.wqkv.slices.size(), 3u);
  ExpectSlice(a.wqkv.slices[0], "model.layers.0.self_attn.q_proj.weight", {256, 128}, 0, 128, 128);
  ExpectSlice(a.wqkv.slices[1], "model.layers.0.self_attn.k_proj.weight", {128, 128}, 0, 64, 64);
  ExpectSlice(a.wqkv.slices[2], "model.layers.0.self_attn.v_proj.weight", {128, 128}, 0, 64, 64);
  EXPECT_EQ(SlicesNumel(a.wqkv), a.wqkv.numel());
  EXPECT_EQ(a.wo.shape, (std::vector<int64_t>{128, 128}));
  ASSERT_EQ(a.wo.slices.size(), 1u);
  ExpectSlice(a.wo.slices[0], "model.layers.0.self_attn.o_proj.weight", {128, 256}, 1, 128, 128);
  EXPECT_EQ(a.wo.slices[0].numel(), 128 * 128);
  ExpectSlice(a.q_norm.slices.at(0), "model.layers.0.self_attn.q_norm.weight", {32}, 0, 0, 32);
  ExpectSlice(a.k_norm.slices.at(0), "model.layers.0.self_attn.k_norm.weight", {32}, 0, 0, 32);
}

TEST(LayerWeights, ExpertsAndDenseMlpSliceTheIntermediateDimension) {
  const ModelConfig c = Tiny();
  const WeightNames names{"model.", false};
  const ModelWeightSpec m = DescribeWeights(names, c, ComputeTpShard(c, 1, 2));
  ASSERT_EQ(m.layers.size(), 2u);
  ASSERT_TRUE(m.layers[0].moe);
  const MoeWeightSpec& e = m.layers[0].experts;
  ExpectSlice(e.router.slices.at(0), "model.layers.0.mlp.gate.weight", {3, 128}, 0, 0, 3);
  // Per expert: gate rows, then up rows (E, 2 I, H); down columns (E, H, I); I = 32 on each rank.
  EXPECT_EQ(e.gate_up.shape, (std::vector<int64_t>{3, 64, 128}));
  ASSERT_EQ(e.gate_up.slices.size(), 6u);
  ExpectSlice(e.gate_up.slices[2], "model.layers.0.mlp.experts.1.gate_proj.weight", {64, 128}, 0, 32, 32);
  ExpectSlice(e.gate_up.slices[3], "model.layers.0.mlp.experts.1.up_proj.weight", {64, 128}, 0, 32, 32);
  EXPECT_EQ(e.down.shape, (std::vector<int64_t>{3, 128, 32}));
  ExpectSlice(e.down.slices.at(2), "model.layers.0.mlp.experts.2.down_proj.weight", {128, 64}, 1, 32, 32);
  EXPECT_EQ(SlicesNumel(e.gate_up), e.gate_up.numel());
  EXPECT_EQ(SlicesNumel(e.down), e.down.numel());

  ASSERT_FALSE(m.layers[1].moe);
  const MlpWeightSpec& d = m.layers[1].mlp;
  EXPECT_EQ(d.gate_up.shape, (std::vector<int64_t>{256, 128}));
  ExpectSlice(d.gate_up.slices.at(0), "model.layers.1.mlp.gate_proj.weight", {256, 128}, 0, 128, 128);
  ExpectSlice(d.gate_up.slices.at(1), "model.layers.1.mlp.up_proj.weight", {256, 128}, 0, 128, 128);
  ExpectSlice(d.down.slices.at(0), "model.layers.1.mlp.down_proj.weight", {128, 256}, 1, 128, 128);
  ExpectSlice(m.layers[1].input_norm.slices.at(0), "model.layers.1.input_layernorm.weight", {128}, 0, 0, 128);
  ExpectSlice(m.layers[1].post_norm.slices.at(0), "model.layers.1.post_attention_layernorm.weight", {128}, 0, 0,
              128);
}

TEST(LayerWeights, LmHeadRowsByVocabularyTiedOrNot) {
  ModelConfig c = Tiny();
  c.vocab_size = 10;
  // 4 ranks: 3 rows each; the last holds row 9 and two zero rows.
  const ModelWeightSpec last = DescribeWeights(WeightNames{"model.", false}, c, ComputeTpShard(c, 3, 4));
  EXPECT_EQ(last.lm_head.shape, (std::vector<int64_t>{3, 128}));
  ASSERT_EQ(last.lm_head.slices.size(), 1u);
  ExpectSlice(last.lm_head.slices[0], "lm_head.weight", {10, 128}, 0, 9, 1);
  EXPECT_LT(SlicesNumel(last.lm_head), last.lm_head.numel());
  ExpectSlice(last.embed.slices.at(0), "model.embed_tokens.weight", {10, 128}, 0, 0, 10);
  ExpectSlice(last.final_norm.slices.at(0), "model.norm.weight", {128}, 0, 0, 128);
  // Tied: the embedding's rows.
  const ModelWeightSpec tied = DescribeWeights(WeightNames{"model.language_model.", true}, c, ComputeTpShard(c, 0, 4));
  ExpectSlice(tied.lm_head.slices.at(0), "model.language_model.embed_tokens.weight", {10, 128}, 0, 0, 3);
  // vocab 5 over 4 ranks: rank 3 has no rows at all, only padding.
  c.vocab_size = 5;
  EXPECT_TRUE(DescribeWeights(WeightNames{"model.", false}, c, ComputeTpShard(c, 3, 4)).lm_head.slices.empty());
}

}  // namespace
}  // namespace tandem::engine
