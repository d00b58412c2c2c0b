// The cpu backend's parts (engine/cpu/layers.cc) one at a time, outside the model: at TP 2 the two
// ranks' partial outputs add up to the TP 1 output, for the attention and the routed experts of
// qwen3moe-tiny's layer 0, for qwen35moe-tiny's gated attention, Gated DeltaNet and MoE with a
// shared expert, and for a dense MLP on a small synthetic checkpoint. This pins the shard
// arithmetic each part reads (engine/model/tp_shard.h, layer_weights.h) to its math.
#include "engine/cpu/layers.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/cpu/gated_deltanet.h"
#include "engine/cpu/ops.h"
#include "engine/model/safetensors.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"
#include "tests/common/test_util.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine::cpu {
namespace {

constexpr int64_t kTokens = 5;

// One sequence of kTokens at positions 0..4 in blocks 1 and 0 (of 4 tokens each).
struct Step {
  StepBatch batch;
  StepMeta m;
  std::vector<int32_t> meta;
  Step() {
    SeqChunk c;
    c.tokens = {3, 1, 4, 1, 5};
    c.block_table = {1, 0};
    c.state_slot = 0;
    c.want_logits = true;
    batch.seqs.push_back(c);
    m = PlanStepMeta(batch, false);
    meta.resize(m.total());
    WriteStepMeta(batch, m, 4, meta.data());
  }
};

// A normed input (T, H) of unit-size values.
std::vector<float> Input(int64_t H) {
  std::vector<float> x(kTokens * H);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
  return x;
}

// part(shard, ctx, out) at TP 1 and on both ranks of TP 2; expects rank0 + rank1 == whole.
using RunPart = std::function<absl::Status(const TpShard&, StepContext&, float*)>;
void ExpectRanksAddUp(const ModelConfig& cfg, const std::string& what, const RunPart& run) {
  const int64_t H = cfg.hidden_size;
  const std::vector<float> inv_freq = rope_inv_freq(cfg.rope_theta, cfg.RotaryDim());
  std::vector<std::vector<float>> outs;
  for (const auto& [rank, world] : std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 2}}) {
    const TpShard shard = ComputeTpShard(cfg, rank, world);
    Step step;
    PagedKvCache kv(1, 2, 4, shard.n_kv_heads, cfg.head_dim);
    ThreadPool pool(2);
    StepContext ctx;
    ctx.m = step.m;
    ctx.meta = step.meta.data();
    ctx.block_size = 4;
    ctx.pool = &pool;
    ctx.kv = &kv;
    ctx.inv_freq = inv_freq.data();
    ctx.batch = &step.batch;
    std::vector<float> out(kTokens * H, 0.0f);
    const absl::Status st = run(shard, ctx, out.data());
    ASSERT_TRUE(st.ok()) << what << " rank " << rank << "/" << world << ": " << st;
    outs.push_back(out);
  }
  std::vector<float> sum(outs[0].size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = outs[1][i] + outs[2][i];
  const double rel = testing::RelativeError(sum, outs[0]);
  const double rank0_alone = testing::RelativeError(outs[1], outs[0]);
  std::printf("%s: |rank0 + rank1 - tp1| / max|tp1| = %.3g (rank 0 alone: %.3g)\n", what.c_str(), rel, rank0_alone);
  EXPECT_LT(rel, 1e-5) << what;
  // Each rank holds a real part of the output, not all of it.
  EXPECT_GT(rank0_alone, 0.05) << what;
}

class TinyLayer0 : public ::testing::Test {
 protected:
  void SetUp() override { Open(testing::TinyModelDir()); }
  void Open(const std::string& dir) {
    auto cfg = LoadModelConfig(dir);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    cfg_ = *cfg;
    auto ckpt = Checkpoint::Open(dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    ckpt_ = std::move(*ckpt);
    auto names = ResolveWeightNames(*ckpt_, cfg_);
    ASSERT_TRUE(names.ok()) << names.status();
    names_ = *names;
  }
  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ckpt_;
  WeightNames names_;
};

TEST_F(TinyLayer0, AttentionRanksAddUpToTp1) {
  const std::vector<float> x = Input(cfg_.hidden_size);
  ExpectRanksAddUp(cfg_, "attention", [&](const TpShard& shard, StepContext& ctx, float* out) -> absl::Status {
    ASSIGN_OR_RETURN(auto part, Attention::Load(*ckpt_, DescribeAttention(names_, cfg_, shard, 0), cfg_, shard, 0));
    if (part->n_kv_heads_local() != shard.n_kv_heads) return absl::InternalError("kv heads");
    return part->Forward(ctx, x.data(), out);
  });
}

TEST_F(TinyLayer0, MoeFfnRanksAddUpToTp1) {
  const std::vector<float> x = Input(cfg_.hidden_size);
  ExpectRanksAddUp(cfg_, "moe ffn", [&](const TpShard& shard, StepContext& ctx, float* out) -> absl::Status {
    ASSIGN_OR_RETURN(auto part, MoeFfn::Load(*ckpt_, DescribeMoe(names_, cfg_, shard, 0), cfg_, shard));
    return part->Forward(ctx, x.data(), out);
  });
}

// qwen35moe-tiny: layer 0 is a Gated DeltaNet, layer 3 gated full attention; every layer's MoE
// has a shared expert.
class TinyHybrid : public TinyLayer0 {
 protected:
  void SetUp() override { Open(testing::Qwen35MoeTinyDir()); }
};

TEST_F(TinyHybrid, GatedAttentionRanksAddUpToTp1) {
  ASSERT_TRUE(cfg_.attention_output_gate);
  const std::vector<float> x = Input(cfg_.hidden_size);
  ExpectRanksAddUp(cfg_, "gated attention", [&](const TpShard& shard, StepContext& ctx, float* out) -> absl::Status {
    ASSIGN_OR_RETURN(auto part, Attention::Load(*ckpt_, DescribeAttention(names_, cfg_, shard, 3), cfg_, shard, 0));
    return part->Forward(ctx, x.data(), out);
  });
}

TEST_F(TinyHybrid, MoeWithSharedExpertRanksAddUpToTp1) {
  const std::vector<float> x = Input(cfg_.hidden_size);
  ExpectRanksAddUp(cfg_, "moe + shared expert", [&](const TpShard& shard, StepContext& ctx, float* out) -> absl::Status {
    const MoeWeightSpec spec = DescribeMoe(names_, cfg_, shard, 0);
    if (!spec.shared) return absl::InternalError("no shared expert described");
    ASSIGN_OR_RETURN(auto part, MoeFfn::Load(*ckpt_, spec, cfg_, shard));
    return part->Forward(ctx, x.data(), out);
  });
}

TEST_F(TinyHybrid, GatedDeltaNetRanksAddUpToTp1) {
  const std::vector<float> x = Input(cfg_.hidden_size);
  ExpectRanksAddUp(cfg_, "gated deltanet", [&](const TpShard& shard, StepContext& ctx, float* out) -> absl::Status {
    ASSIGN_OR_RETURN(auto part,
                     GatedDeltaNet::Load(*ckpt_, DescribeLinearAttention(names_, cfg_, shard, 0), cfg_, shard));
    part->AllocateStates(1);  // the step's one sequence is in slot 0
    return part->Forward(ctx, x.data(), out);
  });
}

TEST(DenseMlp, RanksAddUpToTp1OnASyntheticCheckpoint) {
  ModelConfig cfg;
  cfg.hidden_size = 16;
  cfg.intermediate_size = 8;
  cfg.num_attention_heads = 2;
  cfg.num_key_value_heads = 2;
  cfg.head_dim = 8;
  cfg.vocab_size = 8;
  const int64_t H = cfg.hidden_size, I = cfg.intermediate_size;
  auto values = [](int64_t n, float phase) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = 0.3f * std::cos(0.61f * static_cast<float>(i) + phase);
    return v;
  };
  ::tandem::testing::TempDir dir;
  const std::string p = "model.layers.0.mlp.";
  ASSERT_TRUE(WriteSafetensors(dir.path() + "/model.safetensors",
                               {{p + "gate_proj.weight", DType::kF32, {I, H}, values(I * H, 0.0f), {}, {}},
                                {p + "up_proj.weight", DType::kF32, {I, H}, values(I * H, 1.0f), {}, {}},
                                {p + "down_proj.weight", DType::kF32, {H, I}, values(H * I, 2.0f), {}, {}}})
                  .ok());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  WeightNames names;
  names.prefix = "model.";
  const std::vector<float> x = Input(H);
  ExpectRanksAddUp(cfg, "dense mlp", [&](const TpShard& shard, StepContext& ctx, float* out) -> absl::Status {
    ASSIGN_OR_RETURN(auto part, DenseMlp::Load(**ckpt, DescribeMlp(names, cfg, shard, 0), cfg, shard));
    return part->Forward(ctx, x.data(), out);
  });
}

}  // namespace
}  // namespace tandem::engine::cpu
