// What each part reads on a rank (engine/model/layer_weights.h): the tensor names, stored shapes
// and slices of every weight of the tiny model's shapes at TP 1 and 2, dense and MoE layers.
#include "engine/model/layer_weights.h"

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "engine/generate.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/test_util.h"
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


// Every tensor the hybrid fixtures hold is described (and read with its stored shape) at TP 1, and
// at TP 2 and 4 every spec's slices fill it exactly (lm_head padding aside). For the FP8 one that
// includes every weight_scale_inv: each is read beside its weight, none is left over.
TEST(LayerWeights, HybridFixturesAreDescribedWhole) {
  for (const char* fixture : {"qwen35moe-tiny", "qwen3next-tiny", "qwen35moe-fp8-tiny"}) {
    auto config = LoadModelConfig(testing::TestData(fixture));
    ASSERT_TRUE(config.ok()) << config.status();
    auto ckpt = Checkpoint::Open(testing::TestData(fixture));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    auto names = ResolveWeightNames(**ckpt, *config);
    ASSERT_TRUE(names.ok()) << names.status();
    EXPECT_FALSE(names->fused_experts);
    for (int tp : {1, 2, 4}) {
      ASSERT_TRUE(CheckTpShard(*config, tp).ok()) << fixture << " tp " << tp;
      for (int rank = 0; rank < tp; ++rank) {
        const ModelWeightSpec m = DescribeWeights(*names, *config, ComputeTpShard(*config, rank, tp));
        ASSERT_TRUE(m.layers[0].linear);
        ASSERT_FALSE(m.layers[3].linear);
        EXPECT_TRUE(m.layers[0].experts.shared);
        testing::RecordingCheckpoint rec(**ckpt);
        for (const WeightSpec* w : testing::AllSpecs(m)) {
          auto data = testing::ReadSpec(rec, *w);
          ASSERT_TRUE(data.ok()) << fixture << " tp " << tp << ": " << data.status();
          if (w != &m.lm_head) {
            int64_t n = 0;
            for (const WeightSlice& s : w->slices) n += s.numel();
            EXPECT_EQ(n, w->numel()) << w->slices.at(0).name;
          }
        }
        if (tp == 1) {
          std::set<std::string> read(rec.read().begin(), rec.read().end());
          const std::vector<std::string> all = (*ckpt)->Names();
          EXPECT_EQ(std::vector<std::string>(read.begin(), read.end()), all) << fixture;
          std::printf("  %s: %zu of %zu tensors read at tp 1\n", fixture, read.size(), all.size());
        }
      }
    }
  }
  // The gated q_proj of the full-attention layer: per head [q; gate], rank 1 of 2 gets heads 4..7.
  auto config = LoadModelConfig(testing::TestData("qwen35moe-tiny"));
  ASSERT_TRUE(config.ok());
  const AttentionWeightSpec a = DescribeAttention(WeightNames{"model.", false}, *config, ComputeTpShard(*config, 1, 2), 3);
  ASSERT_EQ(a.wqkv.slices.size(), 4u + 2u);
  ExpectSlice(a.wqkv.slices[0], "model.layers.3.self_attn.q_proj.weight", {512, 128}, 0, 4 * 64, 32);
  ExpectSlice(a.gate.slices.at(3), "model.layers.3.self_attn.q_proj.weight", {512, 128}, 0, 7 * 64 + 32, 32);
  EXPECT_EQ(a.gate.shape, (std::vector<int64_t>{128, 128}));
  const LinearAttentionWeightSpec l = DescribeLinearAttention(WeightNames{"model.", false}, *config, ComputeTpShard(*config, 1, 2), 0);
  // Key heads 2..3 (q rows 64..127, k rows 128 + 64..), value heads 4..7 (v rows 256 + 128..).
  ExpectSlice(l.in_qkv.slices.at(0), "model.layers.0.linear_attn.in_proj_qkv.weight", {512, 128}, 0, 64, 64);
  ExpectSlice(l.in_qkv.slices.at(1), "model.layers.0.linear_attn.in_proj_qkv.weight", {512, 128}, 0, 192, 64);
  ExpectSlice(l.in_qkv.slices.at(2), "model.layers.0.linear_attn.in_proj_qkv.weight", {512, 128}, 0, 384, 128);
  ExpectSlice(l.conv.slices.at(2), "model.layers.0.linear_attn.conv1d.weight", {512, 1, 4}, 0, 384, 128);
  ExpectSlice(l.a_log.slices.at(0), "model.layers.0.linear_attn.A_log", {8}, 0, 4, 4);
  ExpectSlice(l.out.slices.at(0), "model.layers.0.linear_attn.out_proj.weight", {128, 256}, 1, 128, 128);
}

// Qwen3-Next's fused in_proj_qkvz / in_proj_ba, built here from qwen35moe-tiny's split ones, read
// into exactly the same packed tensors at TP 1, 2 and 4.
TEST(LayerWeights, FusedQkvzReadsLikeTheSplitLayout) {
  const std::string src = testing::TestData("qwen35moe-tiny");
  auto config = LoadModelConfig(src);
  ASSERT_TRUE(config.ok()) << config.status();
  const int64_t H = 128, dk = 32, dv = 32, NK = 4, NV = 8, r = NV / NK;
  std::vector<NamedTensorData> tensors = testing::ReadAllTensors(src);
  ASSERT_FALSE(tensors.empty());
  std::map<std::string, NamedTensorData> by_name;
  for (auto& t : tensors) by_name[t.name] = std::move(t);
  std::vector<NamedTensorData> out;
  for (auto& [name, t] : by_name) {
    const std::string::size_type at = name.find("linear_attn.in_proj_qkv.weight");
    if (at == std::string::npos) {
      if (name.find("linear_attn.in_proj_") == std::string::npos) out.push_back(t);
      continue;
    }
    const std::string base = name.substr(0, at) + "linear_attn.";
    const auto& qkv = t.floats;
    const auto& z = by_name[base + "in_proj_z.weight"].floats;
    const auto& b = by_name[base + "in_proj_b.weight"].floats;
    const auto& a = by_name[base + "in_proj_a.weight"].floats;
    auto rows = [&](const std::vector<float>& w, int64_t r0, int64_t n, std::vector<float>& dst) {
      dst.insert(dst.end(), w.begin() + r0 * H, w.begin() + (r0 + n) * H);
    };
    NamedTensorData qkvz{base + "in_proj_qkvz.weight", DType::kBF16, {NK * (2 * dk + 2 * r * dv), H}, {}, {}, {}};
    NamedTensorData ba{base + "in_proj_ba.weight", DType::kBF16, {2 * NV, H}, {}, {}, {}};
    for (int64_t g = 0; g < NK; ++g) {
      rows(qkv, g * dk, dk, qkvz.floats);
      rows(qkv, NK * dk + g * dk, dk, qkvz.floats);
      rows(qkv, 2 * NK * dk + g * r * dv, r * dv, qkvz.floats);
      rows(z, g * r * dv, r * dv, qkvz.floats);
      rows(b, g * r, r, ba.floats);
      rows(a, g * r, r, ba.floats);
    }
    out.push_back(std::move(qkvz));
    out.push_back(std::move(ba));
  }
  testing::TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", out).ok());
  ModelConfig next = *config;
  next.model_type = "qwen3_next";
  auto split_ckpt = Checkpoint::Open(src);
  auto fused_ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(split_ckpt.ok() && fused_ckpt.ok());
  const WeightNames names{"model.", false};
  for (int tp : {1, 2, 4}) {
    for (int rank = 0; rank < tp; ++rank) {
      const LinearAttentionWeightSpec s = DescribeLinearAttention(names, *config, ComputeTpShard(*config, rank, tp), 1);
      const LinearAttentionWeightSpec f = DescribeLinearAttention(names, next, ComputeTpShard(next, rank, tp), 1);
      EXPECT_EQ(f.in_qkv.slices.at(0).name, "model.layers.1.linear_attn.in_proj_qkvz.weight");
      for (auto part : {&LinearAttentionWeightSpec::in_qkv, &LinearAttentionWeightSpec::in_z,
                        &LinearAttentionWeightSpec::in_b, &LinearAttentionWeightSpec::in_a}) {
        EXPECT_EQ((s.*part).shape, (f.*part).shape);
        auto want = testing::ReadSpec(**split_ckpt, s.*part);
        auto got = testing::ReadSpec(**fused_ckpt, f.*part);
        ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
        EXPECT_EQ(*want, *got) << "tp " << tp << " rank " << rank << " " << (f.*part).slices.at(0).name;
      }
    }
  }
}

// The same fusion of qwen35moe-fp8-tiny's FP8 projections, as Qwen3-Next-80B-A3B-FP8 stores them:
// in_proj_qkvz's e4m3 rows in the per-key-head order with its scale rows moved along (each
// section of a group is whole 32-row blocks here), in_proj_ba bf16 without scales. Every rank of
// TP 1/2/4 reads the fused layout into the values it reads from the split one.
TEST(LayerWeights, FusedFp8QkvzReadsLikeTheSplitLayout) {
  const std::string src = testing::TestData("qwen35moe-fp8-tiny");
  auto config = LoadModelConfig(src);
  ASSERT_TRUE(config.ok()) << config.status();
  auto split_ckpt = Checkpoint::Open(src);
  ASSERT_TRUE(split_ckpt.ok()) << split_ckpt.status();
  const int64_t H = 128, dk = 32, NK = 4, NV = 8, rdv = 64, B = config->weight_block_out;
  ASSERT_EQ(B, 32);
  ASSERT_EQ(config->weight_block_in, 32);
  const std::string base = "model.layers.1.linear_attn.";
  auto view = [&](const std::string& name) { return (*split_ckpt)->View(base + name); };
  auto qkv = view("in_proj_qkv.weight"), z = view("in_proj_z.weight");
  auto qkv_s = (*split_ckpt)->Read(base + "in_proj_qkv.weight_scale_inv", {NK * (2 * dk) / B + NV * 32 / B, H / B});
  auto z_s = (*split_ckpt)->Read(base + "in_proj_z.weight_scale_inv", {NV * 32 / B, H / B});
  auto b = (*split_ckpt)->Read(base + "in_proj_b.weight", {NV, H}), a = (*split_ckpt)->Read(base + "in_proj_a.weight", {NV, H});
  ASSERT_TRUE(qkv.ok() && z.ok() && qkv_s.ok() && z_s.ok() && b.ok() && a.ok());
  ASSERT_EQ(qkv->dtype, DType::kF8E4M3);
  NamedTensorData qkvz{base + "in_proj_qkvz.weight", DType::kF8E4M3, {NK * (2 * dk + 2 * rdv), H}, {}, {}, {}};
  NamedTensorData qkvz_s{base + "in_proj_qkvz.weight_scale_inv", DType::kF32, {NK * (2 * dk + 2 * rdv) / B, H / B}, {}, {}, {}};
  NamedTensorData ba{base + "in_proj_ba.weight", DType::kBF16, {2 * NV, H}, {}, {}, {}};
  // Rows [r0, r0 + n) of a stored tensor and the scale rows of their blocks.
  auto take = [&](const TensorView& w, const Tensor& scale, int64_t r0, int64_t n) {
    qkvz.raw.append(reinterpret_cast<const char*>(w.data) + r0 * H, static_cast<size_t>(n * H));
    qkvz_s.floats.insert(qkvz_s.floats.end(), scale.data.begin() + (r0 / B) * (H / B),
                         scale.data.begin() + ((r0 + n) / B) * (H / B));
  };
  const int64_t r = NV / NK;
  for (int64_t g = 0; g < NK; ++g) {
    take(*qkv, *qkv_s, g * dk, dk);
    take(*qkv, *qkv_s, NK * dk + g * dk, dk);
    take(*qkv, *qkv_s, 2 * NK * dk + g * rdv, rdv);
    take(*z, *z_s, g * rdv, rdv);
    ba.floats.insert(ba.floats.end(), b->data.begin() + g * r * H, b->data.begin() + (g + 1) * r * H);
    ba.floats.insert(ba.floats.end(), a->data.begin() + g * r * H, a->data.begin() + (g + 1) * r * H);
  }
  testing::TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", {qkvz, qkvz_s, ba}).ok());
  auto fused_ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(fused_ckpt.ok()) << fused_ckpt.status();
  ModelConfig next = *config;
  next.model_type = "qwen3_next";
  const WeightNames names{"model.", false};
  for (int tp : {1, 2, 4}) {
    for (int rank = 0; rank < tp; ++rank) {
      const LinearAttentionWeightSpec s = DescribeLinearAttention(names, *config, ComputeTpShard(*config, rank, tp), 1);
      const LinearAttentionWeightSpec f = DescribeLinearAttention(names, next, ComputeTpShard(next, rank, tp), 1);
      for (auto part : {&LinearAttentionWeightSpec::in_qkv, &LinearAttentionWeightSpec::in_z,
                        &LinearAttentionWeightSpec::in_b, &LinearAttentionWeightSpec::in_a}) {
        auto want = testing::ReadSpec(**split_ckpt, s.*part);
        auto got = testing::ReadSpec(**fused_ckpt, f.*part);
        ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
        EXPECT_EQ(*want, *got) << "tp " << tp << " rank " << rank << " " << (f.*part).slices.at(0).name;
      }
    }
  }
}

// qwen3moe-tiny with its experts fused (gate_up_proj [E, 2I, H], down_proj [E, H, I], as
// transformers 5 saves them): the same packed expert weights on every rank of TP 1/2/4, and
// bit-identical cpu logits.
TEST(LayerWeights, FusedExpertsGiveIdenticalLogits) {
  const std::string src = testing::TestData("qwen3moe-tiny");
  auto config = LoadModelConfig(src);
  ASSERT_TRUE(config.ok()) << config.status();
  const int64_t E = config->num_experts, I = config->moe_intermediate_size, H = config->hidden_size;
  std::map<std::string, NamedTensorData> by_name;
  for (auto& t : testing::ReadAllTensors(src)) by_name[t.name] = std::move(t);
  ASSERT_FALSE(by_name.empty());
  std::vector<NamedTensorData> out;
  for (auto& [name, t] : by_name) {
    if (name.find(".mlp.experts.") == std::string::npos) out.push_back(t);
  }
  for (int64_t l = 0; l < config->num_hidden_layers; ++l) {
    NamedTensorData gate_up{FusedExpertsKey("model.", l, "gate_up_proj"), DType::kBF16, {E, 2 * I, H}, {}, {}, {}};
    NamedTensorData down{FusedExpertsKey("model.", l, "down_proj"), DType::kBF16, {E, H, I}, {}, {}, {}};
    for (int64_t e = 0; e < E; ++e) {
      for (const char* p : {"gate_proj", "up_proj"}) {
        const auto& w = by_name.at(ExpertKey("model.", l, e, p)).floats;
        gate_up.floats.insert(gate_up.floats.end(), w.begin(), w.end());
      }
      const auto& d = by_name.at(ExpertKey("model.", l, e, "down_proj")).floats;
      down.floats.insert(down.floats.end(), d.begin(), d.end());
    }
    out.push_back(std::move(gate_up));
    out.push_back(std::move(down));
  }
  testing::TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", out).ok());
  testing::WriteAll(dir / "config.json", testing::ReadTextFile(src + "/config.json"));

  auto per_expert = Checkpoint::Open(src);
  auto fused = Checkpoint::Open(dir.path());
  ASSERT_TRUE(per_expert.ok() && fused.ok());
  auto fused_names = ResolveWeightNames(**fused, *config);
  ASSERT_TRUE(fused_names.ok()) << fused_names.status();
  EXPECT_TRUE(fused_names->fused_experts);
  for (int tp : {1, 2, 4}) {
    for (int rank = 0; rank < tp; ++rank) {
      const TpShard shard = ComputeTpShard(*config, rank, tp);
      const MoeWeightSpec want_spec = DescribeMoe(WeightNames{"model.", false}, *config, shard, 2);
      const MoeWeightSpec got_spec = DescribeMoe(*fused_names, *config, shard, 2);
      EXPECT_EQ(got_spec.gate_up.slices.at(3).name, "model.layers.2.mlp.experts.gate_up_proj");
      EXPECT_EQ(got_spec.gate_up.slices.at(3).index, 1);
      for (auto part : {&MoeWeightSpec::gate_up, &MoeWeightSpec::down}) {
        auto want = testing::ReadSpec(**per_expert, want_spec.*part);
        auto got = testing::ReadSpec(**fused, got_spec.*part);
        // The default ReadIndexedSlice (through ReadSlice) reads the same as the file's own.
        testing::RecordingCheckpoint generic(**fused);
        auto got_generic = testing::ReadSpec(generic, got_spec.*part);
        ASSERT_TRUE(want.ok() && got.ok() && got_generic.ok()) << want.status() << got.status();
        EXPECT_EQ(*want, *got) << "tp " << tp << " rank " << rank;
        EXPECT_EQ(*want, *got_generic) << "tp " << tp << " rank " << rank;
      }
    }
  }

  // End to end on the cpu backend: the same prompt, bit-identical logits.
  const std::vector<int32_t> prompt = {1, 17, 300, 4000, 42, 42, 7, 2048, 9};
  std::vector<std::vector<float>> logits;
  for (const std::string& model_dir : {src, dir.path()}) {
    ModelLoadOptions opt;
    opt.threads = 1;
    auto model = Model::Load(model_dir, opt);
    ASSERT_TRUE(model.ok()) << model.status();
    StepDriver driver(model->get(), nullptr);
    auto l = PromptLogits(driver, prompt);
    ASSERT_TRUE(l.ok()) << l.status();
    logits.emplace_back(l->data.begin(), l->data.end());
  }
  ASSERT_EQ(logits[0].size(), prompt.size() * 4096);
  EXPECT_TRUE(logits[0] == logits[1]) << "fused experts changed the logits";
  size_t differ = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) differ += logits[0][i] != logits[1][i];
  std::printf("  fused vs per-expert: %zu of %zu logits differ\n", differ, logits[0].size());
}

// Block-scaled FP8 (a weight F8_E4M3 with its float32 weight_scale_inv): a [5, 7] matrix in
// [2, 3] blocks (3 x 3 scales, the last block row and column partial), and a stack of two.
struct Fp8Fixture {
  static constexpr int64_t kOut = 5, kIn = 7, kBo = 2, kBi = 3;
  // Code of element (e, o, i): positive finite codes that differ across the matrix.
  static uint8_t Code(int64_t e, int64_t o, int64_t i) { return static_cast<uint8_t>(0x20 + (e * 35 + o * kIn + i) % 0x50); }
  // Scale of block (e, bo, bi): distinct powers of two and non-powers.
  static float Scale(int64_t e, int64_t bo, int64_t bi) { return 0.25f * static_cast<float>(1 + e * 9 + bo * 3 + bi) + 0.5f; }
  static float Want(int64_t e, int64_t o, int64_t i) { return F8E4M3ToFloat(Code(e, o, i)) * Scale(e, o / kBo, i / kBi); }

  static NamedTensorData Weight(const std::string& name, int64_t experts) {
    NamedTensorData w{name, DType::kF8E4M3, {kOut, kIn}, {}, {}, {}};
    if (experts > 0) w.shape.insert(w.shape.begin(), experts);
    for (int64_t e = 0; e < std::max<int64_t>(experts, 1); ++e)
      for (int64_t o = 0; o < kOut; ++o)
        for (int64_t i = 0; i < kIn; ++i) w.raw.push_back(static_cast<char>(Code(e, o, i)));
    return w;
  }
  static NamedTensorData Scales(const std::string& name, int64_t experts, std::vector<int64_t> grid = {3, 3}) {
    NamedTensorData s{name, DType::kF32, grid, {}, {}, {}};
    if (experts > 0) s.shape.insert(s.shape.begin(), experts);
    for (int64_t e = 0; e < std::max<int64_t>(experts, 1); ++e)
      for (int64_t bo = 0; bo < grid[0]; ++bo)
        for (int64_t bi = 0; bi < grid[1]; ++bi) s.floats.push_back(Scale(e, bo, bi));
    return s;
  }
};

WeightSlice Fp8Slice(std::string name, std::vector<int64_t> shape, int dim, int64_t start, int64_t len,
                     int64_t index = -1) {
  return WeightSlice{std::move(name), std::move(shape), dim, start, len, index, Fp8Fixture::kBo, Fp8Fixture::kBi};
}

// Slices that start and end inside blocks: each element keeps its own block's scale.
TEST(LayerWeights, Fp8SlicesCuttingBlocksKeepEachElementsScale) {
  using F = Fp8Fixture;
  testing::TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors",
                               {F::Weight("m.weight", 0), F::Scales("m.weight_scale_inv", 0),
                                F::Weight("m.experts.gate_up_proj", 2), F::Scales("m.experts.gate_up_proj_scale_inv", 2)})
                  .ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  using C = testing::SliceCase;
  for (const C& c : {C{0, 0, F::kOut, -1}, C{0, 1, 3, -1}, C{1, 2, 4, -1}, C{1, 4, 3, -1}, C{1, 1, 3, 1},
                     C{2, 2, 4, 1}, C{2, 1, 1, 0}}) {
    WeightSlice s = testing::CaseSlice(c, "m.weight", "m.experts.gate_up_proj", 2, F::kOut, F::kIn);
    s.block_out = F::kBo;
    s.block_in = F::kBi;
    auto t = ReadWeightSlice(**ckpt, s);
    ASSERT_TRUE(t.ok()) << t.status();
    testing::ExpectSliceValues(*t, s, F::Want);
  }
}

TEST(LayerWeights, Fp8RefusesAMissingOrMisshapenScale) {
  using F = Fp8Fixture;
  testing::TempDir dir;
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors",
                               {F::Weight("alone.weight", 0), F::Weight("bad.weight", 0),
                                F::Scales("bad.weight_scale_inv", 0, {2, 3})})
                  .ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto alone = ReadWeightSlice(**ckpt, Fp8Slice("alone.weight", {F::kOut, F::kIn}, 0, 0, 2));
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(testing::Msg(alone.status()).find("'alone.weight' in model.safetensors is F8_E4M3 but has no 'alone.weight_scale_inv'"),
            std::string::npos) << alone.status();
  // A plain read of an F8 tensor without scales is refused the same way (never raw FP8 values).
  EXPECT_FALSE((*ckpt)->Read("alone.weight", {F::kOut, F::kIn}).ok());
  auto bad = ReadWeightSlice(**ckpt, Fp8Slice("bad.weight", {F::kOut, F::kIn}, 1, 0, 3));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(testing::Msg(bad.status()).find("tensor 'bad.weight_scale_inv': expected shape [3, 3] (blocks of [2, 3] over 'bad.weight' [5, 7]), found [2, 3]"),
            std::string::npos) << bad.status();
  // Scales but no block size in the config.
  WeightSlice no_block = Fp8Slice("bad.weight", {F::kOut, F::kIn}, 0, 0, 1);
  no_block.block_out = no_block.block_in = 0;
  auto nb = ReadWeightSlice(**ckpt, no_block);
  EXPECT_NE(testing::Msg(nb.status()).find("weight_block_size"), std::string::npos) << nb.status();
}

// A bf16 weight with block scales beside it is neither format: refused naming both tensors, not
// scaled (nor read unscaled) as if one of the two guesses were right.
TEST(LayerWeights, Fp8RefusesBlockScalesBesideAWiderWeight) {
  using F = Fp8Fixture;
  testing::TempDir dir;
  NamedTensorData wide{"wide.weight", DType::kBF16, {F::kOut, F::kIn}, {}, {}, {}};
  wide.floats.assign(F::kOut * F::kIn, 0.5f);
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", {wide, F::Scales("wide.weight_scale_inv", 0)}).ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto t = ReadWeightSlice(**ckpt, Fp8Slice("wide.weight", {F::kOut, F::kIn}, 0, 0, F::kOut));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(testing::Msg(t.status()).find("tensor 'wide.weight' in "), std::string::npos) << t.status();
  EXPECT_NE(testing::Msg(t.status()).find("is BF16 but has block scales 'wide.weight_scale_inv' beside it"),
            std::string::npos)
      << t.status();
}

// Every slice of a described model carries the config's block size.
TEST(LayerWeights, DescribedSlicesCarryTheFp8BlockSize) {
  ModelConfig c = Tiny();
  c.quant_method = "fp8";
  c.weight_block_out = 128;
  c.weight_block_in = 64;
  const ModelWeightSpec m = DescribeWeights(WeightNames{"model.", false}, c, ComputeTpShard(c, 1, 2));
  int n = 0;
  for (const WeightSpec* w : testing::AllSpecs(m)) {
    for (const WeightSlice& s : w->slices) {
      EXPECT_EQ(s.block_out, 128) << s.name;
      EXPECT_EQ(s.block_in, 64) << s.name;
      ++n;
    }
  }
  EXPECT_GT(n, 10);
}

}  // namespace
}  // namespace tandem::engine
