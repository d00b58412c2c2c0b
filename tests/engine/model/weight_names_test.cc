// Weight names: the hub key layout of each part, and the text prefix detected from a checkpoint
// (text-only "model.", multimodal "model.language_model.", tied or separate lm_head).
#include "engine/model/weight_names.h"

#include <gtest/gtest.h>

#include <set>

#include "engine/generate.h"
#include "engine/model.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"
#include "engine/step_driver.h"
#include "nlohmann/json.hpp"
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


// The multimodal checkpoint as published (Qwen3_5MoeForConditionalGeneration), built from
// qwen35moe-tiny: text weights under model.language_model., lm_head at the top, the config nested
// under text_config, a vision tower (model.visual.*, stored as I32 so that any read of it fails)
// and two mtp.* tensors. It describes the same weights as the text-only folder, reads the same
// values, never reads model.visual.*, and lists the mtp tensors.
// Writes the multimodal layout of the text-only folder `src` into `dir`.
void WriteMultimodalFolder(const std::string& src, const TempDir& dir) {
  std::vector<NamedTensorData> tensors = testing::ReadAllTensors(src);
  ASSERT_FALSE(tensors.empty());
  for (NamedTensorData& t : tensors) {
    if (t.name.rfind("model.", 0) == 0) t.name = "model.language_model." + t.name.substr(6);
  }
  tensors.push_back({"model.visual.patch_embed.proj.weight", DType::kI32, {4, 3}, {}, std::vector<int32_t>(12, 7), {}});
  tensors.push_back({"mtp.fc.weight", DType::kBF16, {128, 256}, std::vector<float>(128 * 256, 0.5f), {}, {}});
  tensors.push_back({"mtp.layers.0.input_layernorm.weight", DType::kBF16, {128}, std::vector<float>(128, 1.0f), {}, {}});
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", tensors).ok());
  nlohmann::json text = nlohmann::json::parse(testing::ReadTextFile(src + "/config.json"));
  text.erase("architectures");
  text["mtp_num_hidden_layers"] = 1;
  const nlohmann::json wrapper = {{"model_type", "qwen3_5_moe"},
                                  {"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
                                  {"tie_word_embeddings", false},
                                  {"vision_config", {{"depth", 1}, {"hidden_size", 64}}},
                                  {"text_config", text}};
  testing::WriteAll(dir / "config.json", wrapper.dump(2));
}

TEST(WeightNames, MultimodalLayoutResolvesTheTextModel) {
  const std::string src = TestData("qwen35moe-tiny");
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(WriteMultimodalFolder(src, dir));
  auto config = LoadModelConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->wrapper_model_type, "qwen3_5_moe");
  EXPECT_EQ(config->model_type, "qwen3_5_moe_text");
  EXPECT_EQ(config->mtp_num_hidden_layers, 1);
  auto text_config = LoadModelConfig(src);
  ASSERT_TRUE(text_config.ok());
  auto mm = Checkpoint::Open(dir.path());
  auto plain = Checkpoint::Open(src);
  ASSERT_TRUE(mm.ok() && plain.ok());
  auto mm_names = ResolveWeightNames(**mm, *config);
  ASSERT_TRUE(mm_names.ok()) << mm_names.status();
  EXPECT_EQ(mm_names->prefix, "model.language_model.");
  EXPECT_EQ(mm_names->LmHead(), "lm_head.weight");
  EXPECT_EQ(mm_names->mtp, (std::vector<std::string>{"mtp.fc.weight", "mtp.layers.0.input_layernorm.weight"}));
  auto plain_names = ResolveWeightNames(**plain, *text_config);
  ASSERT_TRUE(plain_names.ok());
  EXPECT_TRUE(plain_names->mtp.empty());

  for (int tp : {1, 2}) {
    for (int rank = 0; rank < tp; ++rank) {
      const ModelWeightSpec want = DescribeWeights(*plain_names, *text_config, ComputeTpShard(*text_config, rank, tp));
      const ModelWeightSpec got = DescribeWeights(*mm_names, *config, ComputeTpShard(*config, rank, tp));
      const auto want_specs = testing::AllSpecs(want), got_specs = testing::AllSpecs(got);
      ASSERT_EQ(want_specs.size(), got_specs.size());
      testing::RecordingCheckpoint rec(**mm);
      for (size_t i = 0; i < want_specs.size(); ++i) {
        ASSERT_EQ(want_specs[i]->slices.size(), got_specs[i]->slices.size());
        for (size_t k = 0; k < want_specs[i]->slices.size(); ++k) {
          std::string name = want_specs[i]->slices[k].name;
          if (name.rfind("model.", 0) == 0) name = "model.language_model." + name.substr(6);
          EXPECT_EQ(got_specs[i]->slices[k].name, name);
        }
        auto a = testing::ReadSpec(**plain, *want_specs[i]);
        auto b = testing::ReadSpec(rec, *got_specs[i]);
        ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
        EXPECT_EQ(*a, *b) << got_specs[i]->slices.at(0).name;
      }
      std::set<std::string> read(rec.read().begin(), rec.read().end());
      for (const std::string& n : read) {
        EXPECT_NE(n.rfind("model.visual.", 0), 0u) << n;
        EXPECT_NE(n.rfind("mtp.", 0), 0u) << n;
      }
      if (tp == 1) {
        std::printf("  multimodal layout: %zu tensors read, of %zu stored (1 visual, 2 mtp not read)\n", read.size(),
                    (*mm)->Names().size());
        EXPECT_EQ(read.size() + 3, (*mm)->Names().size());
      }
    }
  }
  // Reading the vision tower would have failed: it is not a float tensor.
  EXPECT_FALSE((*mm)->Read("model.visual.patch_embed.proj.weight", {4, 3}).ok());
}


// End to end on the cpu backend: the multimodal folder gives bit-identical logits to the
// text-only one (which cpu_model_hybrid_golden checks against transformers), at TP 1.
TEST(WeightNames, MultimodalLayoutGivesTheTextModelsLogits) {
  const std::string src = TestData("qwen35moe-tiny");
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(WriteMultimodalFolder(src, dir));
  const std::vector<int32_t> prompt = {1, 17, 300, 4000, 42, 42, 7, 2048, 9, 3, 100, 5};
  std::vector<std::vector<float>> logits;
  for (const std::string& model_dir : {src, dir.path()}) {
    ModelLoadOptions opt;
    opt.threads = 1;
    auto model = Model::Load(model_dir, opt);
    ASSERT_TRUE(model.ok()) << model_dir << ": " << model.status();
    StepDriver driver(model->get(), nullptr);
    auto l = PromptLogits(driver, prompt);
    ASSERT_TRUE(l.ok()) << l.status();
    logits.emplace_back(l->data.begin(), l->data.end());
  }
  ASSERT_EQ(logits[0].size(), prompt.size() * 4096);
  size_t differ = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) differ += logits[0][i] != logits[1][i];
  EXPECT_EQ(differ, 0u);
  std::printf("  multimodal vs text-only folder: %zu of %zu logits differ\n", differ, logits[0].size());
}

}  // namespace
}  // namespace tandem::engine
