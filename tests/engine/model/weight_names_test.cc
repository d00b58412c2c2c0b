// Weight names: the hub key layout of each part, and the text prefix detected from a checkpoint
// (text-only "model.", multimodal "model.language_model.", tied or separate lm_head).
#include "engine/model/weight_names.h"

#include <gtest/gtest.h>

#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"
#include "tests/engine/model/test_util.h"

namespace tandem::engine {
namespace {

using testing::Msg;
using testing::Shard;
using testing::TempDir;
using testing::TestData;

TEST(WeightNames, KeysAndPrefixDetection) {
  EXPECT_EQ(LayerKey("model.", 0, "self_attn.q_proj.weight"), "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(ExpertKey("model.", 3, 15, "gate_proj"), "model.layers.3.mlp.experts.15.gate_proj.weight");
  EXPECT_EQ(EmbedKey("model.language_model."), "model.language_model.embed_tokens.weight");
  EXPECT_EQ(FinalNormKey("model."), "model.norm.weight");
  EXPECT_EQ(LmHeadKey("model.language_model.", false), "lm_head.weight");
  EXPECT_EQ(LmHeadKey("model.language_model.", true), "model.language_model.embed_tokens.weight");

  auto ckpt = Checkpoint::Open(TestData("qwen3moe-tiny"));
  auto config = LoadModelConfig(TestData("qwen3moe-tiny"));
  ASSERT_TRUE(ckpt.ok() && config.ok());
  auto names = ResolveWeightNames(**ckpt, *config);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->prefix, "model.");
  for (int64_t l = 0; l < config->num_hidden_layers; ++l) {
    for (int64_t e = 0; e < config->num_experts; ++e) {
      for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
        EXPECT_TRUE((*ckpt)->Has(names->Expert(l, e, p))) << names->Expert(l, e, p);
      }
    }
    EXPECT_TRUE((*ckpt)->Has(names->Layer(l, "self_attn.q_norm.weight")));
  }
  EXPECT_TRUE((*ckpt)->Has(names->Embed()));
  EXPECT_TRUE((*ckpt)->Has(names->FinalNorm()));
  EXPECT_EQ(names->LmHead(), "lm_head.weight");

  // A multimodal-style checkpoint with tied embeddings.
  TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors",
                               Shard({"model.language_model.embed_tokens.weight",
                                      "model.visual.patch_embed.weight"}))
                  .ok());
  auto mm = Checkpoint::Open(dir.path());
  ASSERT_TRUE(mm.ok());
  ModelConfig tied = *config;
  tied.tie_word_embeddings = true;
  auto mm_names = ResolveWeightNames(**mm, tied);
  ASSERT_TRUE(mm_names.ok()) << mm_names.status();
  EXPECT_EQ(mm_names->prefix, "model.language_model.");
  EXPECT_EQ(mm_names->LmHead(), "model.language_model.embed_tokens.weight");
  tied.tie_word_embeddings = false;
  auto no_head = ResolveWeightNames(**mm, tied);
  ASSERT_FALSE(no_head.ok());
  EXPECT_NE(Msg(no_head.status()).find("lm_head.weight"), std::string::npos);
  EXPECT_FALSE(DetectWeightPrefix({"transformer.wte.weight"}).ok());
}

}  // namespace
}  // namespace tandem::engine
