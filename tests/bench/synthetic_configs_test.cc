#include "bench/synthetic_configs.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem::bench {
namespace {

int64_t CountLayers(const engine::ModelConfig& c, bool linear) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) n += c.IsLinearAttentionLayer(l) == linear ? 1 : 0;
  return n;
}

TEST(SyntheticConfig, Qwen3MoeUnchanged) {
  auto c = SyntheticConfig("qwen3-30b-a3b");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_type, "qwen3_moe");
  EXPECT_FALSE(c->IsHybrid());
  EXPECT_EQ(c->num_hidden_layers, 48);
  EXPECT_EQ(c->num_attention_heads, 32);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->num_experts, 128);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe_intermediate_size, 768);
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(CountLayers(*c, true), 0);
  EXPECT_EQ(LayerMix(*c), "48 layers: 48 full attention (32 q / 4 kv heads of 128); MoE in 48: 128 experts (768) "
                          "top-8; vocab 151936");
}

// What both published hybrids share: the interval-4 layer mix, gated attention with 16 q / 2 kv
// heads of 256 and a quarter rotated, the DeltaNet's 16 key / 32 value heads of 128 with a width-4
// conv, zero-centred norms, MoE in every layer with a 512-wide shared expert, untied lm_head.
void ExpectHybridShapes(const engine::ModelConfig& c, int64_t layers) {
  EXPECT_TRUE(c.IsHybrid());
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, layers);
  ASSERT_EQ(static_cast<int64_t>(c.layer_types.size()), layers);
  for (int l = 0; l < layers; ++l) EXPECT_EQ(c.IsFullAttentionLayer(l), l % 4 == 3) << l;
  EXPECT_EQ(CountLayers(c, true), layers / 4 * 3);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.RotaryDim(), 64);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_TRUE(c.attention_output_gate);
  EXPECT_TRUE(c.zero_centered_norms);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 32);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  EXPECT_EQ(c.linear_value_head_dim, 128);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.LinearConvDim(), 8192);
  EXPECT_EQ(c.moe_intermediate_size, 512);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  for (int l = 0; l < layers; ++l) EXPECT_TRUE(c.IsMoeLayer(l)) << l;
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.mtp_num_hidden_layers, 0);  // the MTP head is not part of a plain decode step
}

// The published Qwen3.5-35B-A3B and Qwen3-Next-80B-A3B text models, read as the loader reads them:
// every layer type, gate and norm flag as a real checkpoint gets them; what differs between the two.
TEST(SyntheticConfig, HybridsHaveThePublishedShapes) {
  struct Case {
    const char* name;
    const char* model_type;
    int64_t layers, experts, top_k, vocab;
    const char* mix;
  } cases[] = {
      {"qwen3.5-35b-a3b", "qwen3_5_moe_text", 40, 256, 8, 248320,
       "40 layers: 30 Gated DeltaNet + 10 gated full attention (16 q / 2 kv heads of 256), DeltaNet 16 k / 32 v heads "
       "of 128 x 128, conv 4; MoE in 40: 256 experts (512) top-8 + shared expert (512); vocab 248320"},
      {"qwen3-next-80b-a3b", "qwen3_next", 48, 512, 10, 151936,
       "48 layers: 36 Gated DeltaNet + 12 gated full attention (16 q / 2 kv heads of 256), DeltaNet 16 k / 32 v heads "
       "of 128 x 128, conv 4; MoE in 48: 512 experts (512) top-10 + shared expert (512); vocab 151936"}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    auto c = SyntheticConfig(k.name);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->model_type, k.model_type);
    ExpectHybridShapes(*c, k.layers);
    EXPECT_EQ(c->num_experts, k.experts);
    EXPECT_EQ(c->num_experts_per_tok, k.top_k);
    EXPECT_EQ(c->vocab_size, k.vocab);
    EXPECT_EQ(LayerMix(*c), k.mix);
  }
}

TEST(SyntheticConfig, UnknownNameListsTheKnownOnes) {
  auto c = SyntheticConfig("qwen3-235b");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(c.status().message()),
            "unknown synthetic model \"qwen3-235b\" (known: qwen3-30b-a3b, qwen3.5-35b-a3b, qwen3-next-80b-a3b)");
  EXPECT_EQ(SyntheticModelNames().size(), 3u);
  for (const std::string& n : SyntheticModelNames()) EXPECT_TRUE(SyntheticConfig(n).ok()) << n;
}

}  // namespace
}  // namespace tandem::bench
