#include "bench/decode_bytes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "bench/decode_bench_flags.h"
#include "bench/synthetic_configs.h"

namespace tandem::bench {
namespace {

using engine::ModelConfig;

ModelConfig Config(const std::string& name) {
  auto c = SyntheticConfig(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

DecodeReadModel Reads(const ModelConfig& c, int rank = 0, int world = 1) {
  auto m = DescribeDecodeReads(c, rank, world);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

// The parameters counted by hand from the config alone (the published architectures: q_proj with
// the output gate rows when gated, the Gated DeltaNet's projections, conv, A_log, dt_bias and norm,
// SwiGLU experts, the shared expert with its one-row gate), independently of DescribeWeights.
struct HandCount {
  int64_t total = 0, active = 0, state_floats = 0;
};

HandCount CountByHand(const ModelConfig& c) {
  const int64_t H = c.hidden_size, V = c.vocab_size, hd = c.head_dim, L = c.num_hidden_layers;
  const int64_t q_rows = c.num_attention_heads * hd * (c.attention_output_gate ? 2 : 1);
  const int64_t attn = q_rows * H + 2 * c.num_key_value_heads * hd * H + H * c.num_attention_heads * hd + 2 * hd;
  const int64_t nv = c.linear_num_value_heads, dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t conv = 2 * c.linear_num_key_heads * dk + nv * dv, W = c.linear_conv_kernel_dim;
  const int64_t deltanet = conv * H + nv * dv * H + 2 * nv * H + conv * W + 2 * nv + dv + H * nv * dv;
  const int64_t expert = 3 * c.moe_intermediate_size * H;
  const int64_t shared = c.shared_expert_intermediate_size > 0 ? 3 * c.shared_expert_intermediate_size * H + H : 0;
  const int64_t moe_fixed = c.num_experts * H + shared;  // router + shared expert
  HandCount n;
  int64_t linear = 0;
  for (int64_t l = 0; l < L; ++l) linear += c.IsLinearAttentionLayer(l) ? 1 : 0;
  const int64_t fixed = (L - linear) * attn + linear * deltanet + L * (2 * H + moe_fixed) + H + V * H;
  n.total = fixed + L * c.num_experts * expert + (c.tie_word_embeddings ? 0 : V * H);
  n.active = n.total - L * (c.num_experts - c.num_experts_per_tok) * expert;
  n.state_floats = linear * (conv * (W - 1) + nv * dk * dv);
  return n;
}

double Rel(double got, double want) { return std::abs(got - want) / want; }

// Every part from the weight descriptions equals the hand count exactly, and the totals land on
// the published parameter counts: Qwen3-30B-A3B 30.5B total / 3.3B activated (its model card);
// Qwen3.5-35B-A3B "35B total" (the text model: the hub's 35.95B adds the vision tower and the MTP
// head); Qwen3-Next-80B-A3B "80B total". Tolerance 2% on the totals (the published figures are
// rounded to 0.5B or 1B) and 3% on Qwen3-30B-A3B's activated 3.3B. The hybrids' "A3B" is a
// rounded name (their activated count with the embedding is about 3.5-3.9B): only bounded.
TEST(DecodeBytes, ParameterCountsMatchHandCountsAndPublishedTotals) {
  struct Case {
    const char* name;
    double published_total, published_active, active_tolerance;
  } cases[] = {{"qwen3-30b-a3b", 30.5e9, 3.3e9, 0.03},
               {"qwen3.5-35b-a3b", 35e9, 3e9, 0.35},
               {"qwen3-next-80b-a3b", 80e9, 3e9, 0.35}};
  for (const Case& k : cases) {
    const ModelConfig c = Config(k.name);
    const DecodeReadModel m = Reads(c);
    const HandCount hand = CountByHand(c);
    EXPECT_EQ(m.TotalParams(), hand.total) << k.name;
    EXPECT_EQ(m.ActiveParams(), hand.active) << k.name;
    EXPECT_EQ(m.state_per_seq, hand.state_floats) << k.name;
    EXPECT_LT(Rel(m.TotalParams(), k.published_total), 0.02) << k.name << ": " << m.TotalParams();
    EXPECT_LT(Rel(m.ActiveParams(), k.published_active), k.active_tolerance) << k.name << ": " << m.ActiveParams();
    std::printf("  %s: %.2fB total, %.2fB active, state %.1f MB per sequence\n", k.name, m.TotalParams() / 1e9,
                m.ActiveParams() / 1e9, m.StateBytesPerSeq() / 1e6);
  }
}

TEST(DecodeBytes, LayerMixAndParts) {
  const DecodeReadModel q = Reads(Config("qwen3-30b-a3b"));
  EXPECT_EQ(q.full_attention_layers, 48);
  EXPECT_EQ(q.linear_attention_layers, 0);
  EXPECT_EQ(q.params.deltanet, 0);
  EXPECT_EQ(q.params.shared_experts, 0);
  EXPECT_EQ(q.state_per_seq, 0);
  EXPECT_EQ(q.params.expert, 3 * 768 * 2048);

  const DecodeReadModel n = Reads(Config("qwen3-next-80b-a3b"));
  EXPECT_EQ(n.full_attention_layers, 12);
  EXPECT_EQ(n.linear_attention_layers, 36);
  EXPECT_EQ(n.moe_layers, 48);
  EXPECT_EQ(n.mlp_layers, 0);
  // Gated q_proj: 2 x 16 heads x 256 rows, k and v 2 x 256 rows each, o_proj 2048 x 4096, q/k norms.
  EXPECT_EQ(n.params.attention, 12 * ((8192 + 1024) * 2048 + 2048 * 4096 + 512));
  EXPECT_EQ(n.params.shared_experts, 48 * (3 * 512 * 2048 + 2048));
  EXPECT_EQ(n.params.routers, 48 * 512 * 2048);
  // Per layer: conv state 8192 x 3 and S 32 x 128 x 128 floats: 2.2 MB, 79 MB over 36 layers.
  EXPECT_EQ(n.StateBytesPerSeq(), 36 * 4.0 * (8192 * 3 + 32 * 128 * 128));
}

// The qwen3_moe step bytes are what the benchmark always counted (attention, router, norms,
// experts, lm_head, embedding rows, KV) plus the final norm; docs/model-notes.md's 6.08 GB per
// token for 8 experts of 48 layers and lm_head.
TEST(DecodeBytes, Qwen3MoeStepAsBefore) {
  const ModelConfig c = Config("qwen3-30b-a3b");
  const DecodeReadModel m = Reads(c);
  const int B = 8;
  const double ctx = 1040, distinct = 52.5, kv_token = 2.0 * 48 * 4 * 128 * 2;
  const StepBytes b = DecodeStepBytes(m, B, ctx, distinct, kv_token, 0);
  const int64_t H = 2048, qd = 4096, kvd = 512;
  const double attn_bytes = 2.0 * ((qd + 2 * kvd) * H + H * qd + 128 * H + 2 * H + 2 * 128);
  const double expert_bytes = 2.0 * 3 * 768 * H;
  const double before = 48 * (attn_bytes + distinct * expert_bytes) + 2.0 * 151936 * H + 2.0 * B * H + B * ctx * kv_token;
  EXPECT_DOUBLE_EQ(b.total(), before + 2.0 * H);
  EXPECT_EQ(b.state, 0);
  EXPECT_DOUBLE_EQ(b.kv, B * ctx * kv_token);
  const StepBytes one = DecodeStepBytes(m, 1, 0, 8, 0, 0);
  EXPECT_LT(Rel(one.weights + one.experts, 6.08e9), 0.01) << one.weights + one.experts;
}

// A hybrid step: the state of every sequence is read and written; KV only for the full-attention
// layers' bytes per token the caller gives; the routed experts by the distinct count.
TEST(DecodeBytes, HybridStepCountsStateTwice) {
  const DecodeReadModel m = Reads(Config("qwen3.5-35b-a3b"));
  const double state = m.StateBytesPerSeq();
  EXPECT_EQ(state, 30 * 4.0 * (8192 * 3 + 32 * 128 * 128));
  const double kv_token = 2.0 * 10 * 2 * 256 * 2;  // K and V, 10 layers, 2 kv heads of 256, bf16
  const StepBytes b = DecodeStepBytes(m, 32, 4096, 100, kv_token, state);
  EXPECT_DOUBLE_EQ(b.state, 2.0 * 32 * state);
  EXPECT_DOUBLE_EQ(b.kv, 32 * 4096 * kv_token);
  EXPECT_DOUBLE_EQ(b.experts, 2.0 * 100 * 40 * (3 * 512 * 2048));
  EXPECT_DOUBLE_EQ(b.embed, 2.0 * 32 * 2048);
  EXPECT_DOUBLE_EQ(b.weights, 2.0 * m.params.Fixed());
  EXPECT_DOUBLE_EQ(b.total(), b.weights + b.experts + b.embed + b.kv + b.state);
}

// At TP 2 the split parts halve and the replicated ones (norms, routers, embedding, q/k norms, the
// DeltaNet output norm, the shared expert's gate) stay whole on each rank.
TEST(DecodeBytes, TensorParallelRanksSplitTheShardedParts) {
  for (const char* name : {"qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"}) {
    const ModelConfig c = Config(name);
    const DecodeReadModel one = Reads(c), r0 = Reads(c, 0, 2), r1 = Reads(c, 1, 2);
    EXPECT_EQ(r0.params.expert + r1.params.expert, one.params.expert) << name;
    EXPECT_EQ(r0.params.lm_head + r1.params.lm_head, one.params.lm_head) << name;
    EXPECT_EQ(r0.state_per_seq + r1.state_per_seq, one.state_per_seq) << name;
    EXPECT_EQ(r0.params.attention + r1.params.attention, one.params.attention + one.full_attention_layers * 2 * c.head_dim) << name;
    EXPECT_EQ(r0.params.deltanet + r1.params.deltanet, one.params.deltanet + one.linear_attention_layers * c.linear_value_head_dim)
        << name;
    const int64_t shared_gates = c.shared_expert_intermediate_size > 0 ? one.moe_layers * c.hidden_size : 0;
    EXPECT_EQ(r0.params.shared_experts + r1.params.shared_experts, one.params.shared_experts + shared_gates) << name;
    EXPECT_EQ(r0.params.norms, one.params.norms) << name;
    EXPECT_EQ(r0.params.routers, one.params.routers) << name;
    EXPECT_EQ(r0.params.embed, one.params.embed) << name;
  }
  ModelConfig bad = Config("qwen3-next-80b-a3b");
  auto refused = DescribeDecodeReads(bad, 0, 3);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
}

// Bytes of one aligned (rows, cols) matrix in each format, by hand from the published layouts:
// bf16 2 bytes an element; FP8 one byte and a float32 per 128 x 128 block; NVFP4 half a byte, an
// e4m3 byte per 16 elements of a row and a float32 per row.
double Bf16(double rows, double cols) { return 2 * rows * cols; }
double Fp8(double rows, double cols) { return rows * cols + 4 * std::ceil(rows / 128) * std::ceil(cols / 128); }
double Nvfp4(double rows, double cols) { return rows * cols / 2 + rows * cols / 16 + 4 * rows; }

// Qwen3-30B-A3B in each format, every part by hand: the quantized linears (q/k/v packed, o_proj,
// the experts' gate_up and down) in the format, routers, norms, lm_head and embedding in bf16.
TEST(DecodeBytes, Qwen3MoeBytesPerFormatByHand) {
  const ModelConfig c = Config("qwen3-30b-a3b");
  const double H = 2048, qd = 4096, kvd = 512, I = 768, E = 128, V = 151936, L = 48;
  using Matrix = double (*)(double, double);
  struct Case {
    kernels::WeightFormat format;
    Matrix bytes;
  } cases[] = {{kernels::WeightFormat::kBf16, Bf16},
               {kernels::WeightFormat::kFp8Block, Fp8},
               {kernels::WeightFormat::kNvfp4, Nvfp4}};
  double bf16_step = 0;
  for (const Case& k : cases) {
    auto got = DescribeDecodeReads(c, 0, 1, k.format);
    ASSERT_TRUE(got.ok()) << got.status();
    const DecodeReadModel& m = *got;
    EXPECT_EQ(m.format, k.format);
    const double attention = k.bytes(qd + 2 * kvd, H) + k.bytes(H, qd) + 2 * 2 * 128;
    const double expert = k.bytes(2 * I, H) + k.bytes(H, I);
    EXPECT_EQ(m.bytes.attention, L * attention);
    EXPECT_EQ(m.bytes.expert, expert);
    EXPECT_EQ(m.bytes.routers, L * 2 * E * H);
    EXPECT_EQ(m.bytes.norms, 2 * (2 * L * H + H));
    EXPECT_EQ(m.bytes.lm_head, 2 * V * H);
    EXPECT_EQ(m.bytes.embed, 2 * V * H);
    EXPECT_EQ(m.bytes.deltanet + m.bytes.shared_experts + m.bytes.dense_mlps, 0);
    EXPECT_EQ(m.TotalBytes(), L * (attention + 2 * E * H + E * expert) + 2 * (2 * L * H + H) + 2 * 2 * V * H);
    // The parameters do not depend on the format.
    EXPECT_EQ(m.params.expert, 3 * I * H);
    EXPECT_EQ(m.params.attention, L * ((qd + 2 * kvd) * H + H * qd + 2 * 128));
    // Batch 1, 8 experts a layer, no KV: what the speed-up targets (1.7x FP8, 2.5x NVFP4) divide.
    const StepBytes one = DecodeStepBytes(m, 1, 0, 8, 0, 0);
    EXPECT_DOUBLE_EQ(one.total(), L * (attention + 2 * E * H + 8 * expert) + 2 * (2 * L * H + H) + 2 * V * H + 2 * H);
    if (k.format == kernels::WeightFormat::kBf16) bf16_step = one.total();
    std::printf("  %s: %.2f GB of weights, %.3f GB per batch-1 step (%.2fx fewer than bf16)\n",
                WeightFormatName(k.format).c_str(), m.TotalBytes() / 1e9, one.total() / 1e9, bf16_step / one.total());
  }
}

// bf16 bytes are twice the elements in every part, whatever the model.
TEST(DecodeBytes, Bf16BytesAreTwiceTheElements) {
  for (const char* name : {"qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"}) {
    const DecodeReadModel m = Reads(Config(name));
    for (int64_t WeightParts::*part : {&WeightParts::attention, &WeightParts::deltanet, &WeightParts::norms,
                                       &WeightParts::routers, &WeightParts::shared_experts, &WeightParts::dense_mlps,
                                       &WeightParts::expert, &WeightParts::lm_head, &WeightParts::embed}) {
      EXPECT_EQ(m.bytes.*part, 2 * (m.params.*part)) << name;
    }
    EXPECT_EQ(m.TotalBytes(), 2 * m.TotalParams()) << name;
  }
}

// The hybrids quantize the DeltaNet's in_proj qkv and z and out_proj but keep in_proj b and a, conv,
// A_log, dt_bias and norm bf16; the shared expert is quantized, its one-row gate is not.
TEST(DecodeBytes, HybridQuantizedParts) {
  const ModelConfig c = Config("qwen3.5-35b-a3b");
  auto got = DescribeDecodeReads(c, 0, 1, kernels::WeightFormat::kNvfp4);
  ASSERT_TRUE(got.ok()) << got.status();
  const double H = 2048, conv = 2 * 16 * 128 + 32 * 128, vdim = 32 * 128, S = 512;
  const double deltanet = Nvfp4(conv, H) + Nvfp4(vdim, H) + Nvfp4(H, vdim) +
                          Bf16(2 * 32, H) + Bf16(conv, 4) + Bf16(2 * 32 + 128, 1);
  EXPECT_EQ(got->bytes.deltanet, 30 * deltanet);
  EXPECT_EQ(got->bytes.shared_experts, 40 * (Nvfp4(2 * S, H) + Nvfp4(H, S) + Bf16(1, H)));
  // Gated attention: q rows with their gate rows (2 x 16 heads x 256), k and v (2 x 256 each), o_proj.
  EXPECT_EQ(got->bytes.attention, 10 * (Nvfp4(8192, H) + Nvfp4(1024, H) + Nvfp4(H, 4096) + Bf16(2, 256)));
}

// At TP 4 a Qwen3-30B-A3B expert has 192 rows of gate and of up per rank: the packed up rows start
// inside a block, so the rank keeps one scale row per weight row (384 x 16 scales); its 192
// columns of down_proj start at 0, 192, 384, 576, phase 0 or 64: two scale columns either way.
TEST(DecodeBytes, Fp8SplitInsideABlockKeepsAScaleRowPerRow) {
  const ModelConfig c = Config("qwen3-30b-a3b");
  for (int rank = 0; rank < 4; ++rank) {
    auto got = DescribeDecodeReads(c, rank, 4, kernels::WeightFormat::kFp8Block);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->bytes.expert, 384 * 2048 + 4 * 384 * 16 + 2048 * 192 + 4 * 16 * 2) << rank;
    // Attention splits whole heads (8 q heads of 128 rows, one kv head): aligned blocks.
    EXPECT_EQ(got->bytes.attention, 48 * (Fp8(1024 + 256, 2048) + Fp8(2048, 1024) + 2 * 2 * 128)) << rank;
  }
}

// NVFP4 groups 16 columns: a linear whose columns on a rank are not a multiple of 16 is refused,
// naming it; FP8 takes the partial last block (and, the up rows starting at row 200 of the packed
// gate_up, one scale row per weight row).
TEST(DecodeBytes, Nvfp4RefusesColumnsOffAGroup) {
  ModelConfig c = Config("qwen3-30b-a3b");
  c.moe_intermediate_size = 200;
  auto refused = DescribeDecodeReads(c, 0, 1, kernels::WeightFormat::kNvfp4);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("down_proj"), absl::string_view::npos) << refused.status();
  auto fp8 = DescribeDecodeReads(c, 0, 1, kernels::WeightFormat::kFp8Block);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->bytes.expert, 400 * 2048 + 4 * 400 * 16 + Fp8(2048, 200));
}

TEST(DecodeBytes, WeightsDescriptionNamesTheFormat) {
  EXPECT_EQ(WeightsDescription(kernels::WeightFormat::kBf16), "random bf16 weights");
  EXPECT_EQ(WeightsDescription(kernels::WeightFormat::kFp8Block).rfind("random fp8 weights (block 128 x 128", 0), 0u);
  EXPECT_EQ(WeightsDescription(kernels::WeightFormat::kNvfp4).rfind("random nvfp4 weights (e2m1", 0), 0u);
}

}  // namespace
}  // namespace tandem::bench
