#include "engine/model/layer_weights.h"

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/model/nvfp4.h"
#include "engine/model/safetensors.h"

namespace tandem::engine {

namespace {

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

WeightSlice Slice(std::string name, std::vector<int64_t> shape, int dim, int64_t start, int64_t len) {
  return WeightSlice{std::move(name), std::move(shape), dim, start, len};
}

// A replicated tensor, read whole.
WeightSpec Whole(std::string name, std::vector<int64_t> shape) {
  const int64_t rows = shape.at(0);
  WeightSpec w;
  w.shape = shape;
  w.slices.push_back(Slice(std::move(name), std::move(shape), 0, 0, rows));
  return w;
}

// Every slice of `specs` learns the config's FP8 block size (0 for an unquantized checkpoint).
void SetBlocks(const ModelConfig& c, std::initializer_list<WeightSpec*> specs) {
  for (WeightSpec* w : specs) {
    for (WeightSlice& s : w->slices) {
      s.block_out = c.weight_block_out;
      s.block_in = c.weight_block_in;
    }
  }
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Multiplies the slice `t` of s (read as stored) by the block scales in `scale_name`.
absl::Status ApplyBlockScales(const Checkpoint& ckpt, const WeightSlice& s, const std::string& scale_name,
                              Tensor& t) {
  const int mat0 = s.index >= 0 ? 1 : 0;  // the first of the two matrix dims
  if (s.shape.size() != static_cast<size_t>(mat0 + 2)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' ", ShapeString(s.shape), " has block scales '",
                                                   scale_name, "' but is not a matrix (or a stack of them)"));
  }
  if (s.block_out <= 0 || s.block_in <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' has block scales '", scale_name,
                                                   "' but config.json gives no quantization_config.weight_block_size"));
  }
  // Block scales belong to e4m3 values. A wider weight beside them is ambiguous (already
  // dequantized with the scales left behind, or meant to be scaled?); the cuda backend's packer
  // refuses it as well, so both backends read such a checkpoint the same way: not at all.
  if (absl::StatusOr<TensorView> v = ckpt.View(s.name); v.ok() && v->dtype != DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' in ", v->file, " is ", DTypeName(v->dtype),
                                                   " but has block scales '", scale_name,
                                                   "' beside it (a block-scaled FP8 weight is F8_E4M3)"));
  }
  const int64_t rows = s.shape[mat0], cols = s.shape[mat0 + 1];
  std::vector<int64_t> want(s.shape.begin(), s.shape.begin() + mat0);
  want.push_back(CeilDiv(rows, s.block_out));
  want.push_back(CeilDiv(cols, s.block_in));
  ASSIGN_OR_RETURN(std::vector<int64_t> got, ckpt.Shape(scale_name));
  if (got != want) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", scale_name, "': expected shape ", ShapeString(want),
                                                   " (blocks of [", s.block_out, ", ", s.block_in, "] over '", s.name,
                                                   "' ", ShapeString(s.shape), "), found ", ShapeString(got)));
  }
  ASSIGN_OR_RETURN(Tensor scale, s.index >= 0 ? ckpt.ReadIndexedSlice(scale_name, want, s.index, 1, 0, want[1])
                                              : ckpt.Read(scale_name, want));
  const int mdim = s.dim - mat0;  // 0: a slice of rows, 1: of columns
  const int64_t r0 = mdim == 0 ? s.start : 0, c0 = mdim == 1 ? s.start : 0;
  const int64_t nr = mdim == 0 ? s.len : rows, nc = mdim == 1 ? s.len : cols;
  if (static_cast<int64_t>(t.data.size()) != nr * nc) {
    return absl::InternalError(absl::StrCat("tensor '", s.name, "': slice read with ", t.data.size(),
                                            " values, expected ", nr * nc));
  }
  const int64_t scale_cols = want.back();
  for (int64_t r = 0; r < nr; ++r) {
    const float* srow = scale.data.data() + ((r0 + r) / s.block_out) * scale_cols;
    float* row = t.data.data() + r * nc;
    for (int64_t c = 0; c < nc; ++c) row[c] *= srow[(c0 + c) / s.block_in];
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> ReadWeightSlice(const Checkpoint& ckpt, const WeightSlice& s) {
  if (IsNvfp4Weight(ckpt, s.name)) return ReadNvfp4Slice(ckpt, s);
  ASSIGN_OR_RETURN(Tensor t, s.index >= 0 ? ckpt.ReadIndexedSlice(s.name, s.shape, s.index, s.dim, s.start, s.len)
                                          : ckpt.ReadSlice(s.name, s.shape, s.dim, s.start, s.len));
  const std::string scale = WeightScaleInvName(s.name);
  if (ckpt.Has(scale)) RETURN_IF_ERROR(ApplyBlockScales(ckpt, s, scale, t));
  return t;
}

int64_t WeightSlice::numel() const {
  int64_t n = len;
  for (size_t d = index >= 0 ? 1 : 0; d < shape.size(); ++d) {
    if (static_cast<int>(d) != dim) n *= shape[d];
  }
  return n;
}

int64_t WeightSpec::numel() const { return Product(shape); }

AttentionWeightSpec DescribeAttention(const WeightNames& names, const ModelConfig& config, const TpShard& shard,
                                      int64_t layer) {
  const int64_t H = config.hidden_size, hd = config.head_dim;
  const int64_t nh = config.num_attention_heads, nkv = config.num_key_value_heads;
  const int64_t qd = shard.n_heads * hd, kvd = shard.n_kv_heads * hd;
  const int64_t q0 = shard.q_head_start * hd, kv0 = shard.kv_head_start * hd;
  auto key = [&](const char* suffix) { return names.Layer(layer, std::string("self_attn.") + suffix); };
  AttentionWeightSpec a;
  a.wqkv.shape = {qd + 2 * kvd, H};
  a.wqkv.slices = {Slice(key("q_proj.weight"), {nh * hd, H}, 0, q0, qd),
                   Slice(key("k_proj.weight"), {nkv * hd, H}, 0, kv0, kvd),
                   Slice(key("v_proj.weight"), {nkv * hd, H}, 0, kv0, kvd)};
  a.wo.shape = {H, qd};
  a.wo.slices = {Slice(key("o_proj.weight"), {H, nh * hd}, 1, q0, qd)};
  a.q_norm = Whole(key("q_norm.weight"), {hd});
  a.k_norm = Whole(key("k_norm.weight"), {hd});
  if (config.attention_output_gate) {
    // q_proj holds [q_h; gate_h] (2 hd rows) per head: this rank's heads' q rows, then gate rows.
    const std::string q = key("q_proj.weight");
    const std::vector<int64_t> q_shape = {nh * 2 * hd, H};
    a.wqkv.slices.erase(a.wqkv.slices.begin());
    std::vector<WeightSlice> q_rows;
    a.gate.shape = {qd, H};
    for (int64_t h = shard.q_head_start; h < shard.q_head_start + shard.n_heads; ++h) {
      q_rows.push_back(Slice(q, q_shape, 0, h * 2 * hd, hd));
      a.gate.slices.push_back(Slice(q, q_shape, 0, h * 2 * hd + hd, hd));
    }
    a.wqkv.slices.insert(a.wqkv.slices.begin(), q_rows.begin(), q_rows.end());
  }
  SetBlocks(config, {&a.wqkv, &a.wo, &a.q_norm, &a.k_norm, &a.gate});
  return a;
}

LinearAttentionWeightSpec DescribeLinearAttention(const WeightNames& names, const ModelConfig& config,
                                                  const TpShard& shard, int64_t layer) {
  const int64_t H = config.hidden_size, dk = config.linear_key_head_dim, dv = config.linear_value_head_dim;
  const int64_t NK = config.linear_num_key_heads, NV = config.linear_num_value_heads;
  const int64_t r = NV / NK, W = config.linear_conv_kernel_dim;
  const int64_t k0 = shard.linear_k_head_start, nk = shard.n_linear_k_heads;
  const int64_t v0 = shard.linear_v_head_start, nv = shard.n_linear_v_heads;
  const int64_t conv_dim = config.LinearConvDim(), local_conv = 2 * nk * dk + nv * dv;
  auto key = [&](const char* suffix) { return names.Layer(layer, std::string("linear_attn.") + suffix); };
  LinearAttentionWeightSpec a;
  a.in_qkv.shape = {local_conv, H};
  a.in_z.shape = {nv * dv, H};
  a.in_b.shape = {nv, H};
  a.in_a.shape = {nv, H};
  const std::string qkvz = key("in_proj_qkvz.weight"), ba = key("in_proj_ba.weight");
  if (config.model_type == "qwen3_next") {
    // Per key head g: [q dk | k dk | v r dv | z r dv] rows of in_proj_qkvz, [b r | a r] of in_proj_ba.
    const int64_t group = 2 * dk + 2 * r * dv;
    const std::vector<int64_t> qkvz_shape = {NK * group, H}, ba_shape = {2 * NV, H};
    for (int part = 0; part < 3; ++part) {  // q, k, v of every local key head
      for (int64_t g = k0; g < k0 + nk; ++g) {
        const int64_t off = part == 0 ? 0 : part == 1 ? dk : 2 * dk;
        a.in_qkv.slices.push_back(Slice(qkvz, qkvz_shape, 0, g * group + off, part == 2 ? r * dv : dk));
      }
    }
    for (int64_t g = k0; g < k0 + nk; ++g) {
      a.in_z.slices.push_back(Slice(qkvz, qkvz_shape, 0, g * group + 2 * dk + r * dv, r * dv));
      a.in_b.slices.push_back(Slice(ba, ba_shape, 0, g * 2 * r, r));
      a.in_a.slices.push_back(Slice(ba, ba_shape, 0, g * 2 * r + r, r));
    }
  } else {
    const std::string qkv = key("in_proj_qkv.weight");
    const std::vector<int64_t> qkv_shape = {conv_dim, H};
    a.in_qkv.slices = {Slice(qkv, qkv_shape, 0, k0 * dk, nk * dk),
                       Slice(qkv, qkv_shape, 0, NK * dk + k0 * dk, nk * dk),
                       Slice(qkv, qkv_shape, 0, 2 * NK * dk + v0 * dv, nv * dv)};
    a.in_z.slices = {Slice(key("in_proj_z.weight"), {NV * dv, H}, 0, v0 * dv, nv * dv)};
    a.in_b.slices = {Slice(key("in_proj_b.weight"), {NV, H}, 0, v0, nv)};
    a.in_a.slices = {Slice(key("in_proj_a.weight"), {NV, H}, 0, v0, nv)};
  }
  // The conv channels are q|k|v in both layouts.
  const std::string conv = key("conv1d.weight");
  const std::vector<int64_t> conv_shape = {conv_dim, 1, W};
  a.conv.shape = {local_conv, W};
  a.conv.slices = {Slice(conv, conv_shape, 0, k0 * dk, nk * dk),
                   Slice(conv, conv_shape, 0, NK * dk + k0 * dk, nk * dk),
                   Slice(conv, conv_shape, 0, 2 * NK * dk + v0 * dv, nv * dv)};
  a.a_log.shape = {nv};
  a.a_log.slices = {Slice(key("A_log"), {NV}, 0, v0, nv)};
  a.dt_bias.shape = {nv};
  a.dt_bias.slices = {Slice(key("dt_bias"), {NV}, 0, v0, nv)};
  a.norm = Whole(key("norm.weight"), {dv});
  a.out.shape = {H, nv * dv};
  a.out.slices = {Slice(key("out_proj.weight"), {H, NV * dv}, 1, v0 * dv, nv * dv)};
  SetBlocks(config, {&a.in_qkv, &a.in_z, &a.in_b, &a.in_a, &a.conv, &a.a_log, &a.dt_bias, &a.norm, &a.out});
  return a;
}

SharedExpertWeightSpec DescribeSharedExpert(const WeightNames& names, const ModelConfig& config,
                                            const TpShard& shard, int64_t layer) {
  const int64_t H = config.hidden_size, FS = config.shared_expert_intermediate_size;
  const int64_t S = shard.shared_inter, S0 = shard.shared_inter_start;
  auto key = [&](const char* suffix) { return names.Layer(layer, std::string("mlp.shared_expert.") + suffix); };
  SharedExpertWeightSpec m;
  m.gate_up.shape = {2 * S, H};
  m.gate_up.slices = {Slice(key("gate_proj.weight"), {FS, H}, 0, S0, S),
                      Slice(key("up_proj.weight"), {FS, H}, 0, S0, S)};
  m.down.shape = {H, S};
  m.down.slices = {Slice(key("down_proj.weight"), {H, FS}, 1, S0, S)};
  m.gate = Whole(names.Layer(layer, "mlp.shared_expert_gate.weight"), {1, H});
  SetBlocks(config, {&m.gate_up, &m.down, &m.gate});
  return m;
}

MoeWeightSpec DescribeMoe(const WeightNames& names, const ModelConfig& config, const TpShard& shard, int64_t layer) {
  const int64_t H = config.hidden_size, E = config.num_experts, FI = config.moe_intermediate_size;
  const int64_t I = shard.moe_inter, I0 = shard.moe_inter_start;
  MoeWeightSpec m;
  m.router = Whole(names.Layer(layer, "mlp.gate.weight"), {E, H});
  m.gate_up.shape = {E, 2 * I, H};
  m.down.shape = {E, H, I};
  const std::string fused_gate_up = names.FusedExperts(layer, "gate_up_proj");
  const std::string fused_down = names.FusedExperts(layer, "down_proj");
  for (int64_t e = 0; e < E; ++e) {
    if (names.fused_experts) {
      WeightSlice gate = Slice(fused_gate_up, {E, 2 * FI, H}, 1, I0, I);
      WeightSlice up = Slice(fused_gate_up, {E, 2 * FI, H}, 1, FI + I0, I);
      WeightSlice down = Slice(fused_down, {E, H, FI}, 2, I0, I);
      gate.index = up.index = down.index = e;
      m.gate_up.slices.push_back(std::move(gate));
      m.gate_up.slices.push_back(std::move(up));
      m.down.slices.push_back(std::move(down));
      continue;
    }
    m.gate_up.slices.push_back(Slice(names.Expert(layer, e, "gate_proj"), {FI, H}, 0, I0, I));
    m.gate_up.slices.push_back(Slice(names.Expert(layer, e, "up_proj"), {FI, H}, 0, I0, I));
    m.down.slices.push_back(Slice(names.Expert(layer, e, "down_proj"), {H, FI}, 1, I0, I));
  }
  if (config.shared_expert_intermediate_size > 0) {
    m.shared = true;
    m.shared_expert = DescribeSharedExpert(names, config, shard, layer);
  }
  SetBlocks(config, {&m.router, &m.gate_up, &m.down});
  return m;
}

MlpWeightSpec DescribeMlp(const WeightNames& names, const ModelConfig& config, const TpShard& shard, int64_t layer) {
  const int64_t H = config.hidden_size, FI = config.intermediate_size;
  const int64_t I = shard.inter, I0 = shard.inter_start;
  MlpWeightSpec m;
  m.gate_up.shape = {2 * I, H};
  m.gate_up.slices = {Slice(names.Layer(layer, "mlp.gate_proj.weight"), {FI, H}, 0, I0, I),
                      Slice(names.Layer(layer, "mlp.up_proj.weight"), {FI, H}, 0, I0, I)};
  m.down.shape = {H, I};
  m.down.slices = {Slice(names.Layer(layer, "mlp.down_proj.weight"), {H, FI}, 1, I0, I)};
  SetBlocks(config, {&m.gate_up, &m.down});
  return m;
}

ModelWeightSpec DescribeWeights(const WeightNames& names, const ModelConfig& config, const TpShard& shard) {
  const int64_t V = config.vocab_size, H = config.hidden_size;
  ModelWeightSpec m;
  m.embed = Whole(names.Embed(), {V, H});
  m.final_norm = Whole(names.FinalNorm(), {H});
  m.lm_head.shape = {shard.vocab_per_rank, H};
  if (shard.vocab_len > 0) m.lm_head.slices = {Slice(names.LmHead(), {V, H}, 0, shard.vocab_start, shard.vocab_len)};
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    LayerWeightSpec layer;
    layer.input_norm = Whole(names.Layer(l, "input_layernorm.weight"), {H});
    layer.post_norm = Whole(names.Layer(l, "post_attention_layernorm.weight"), {H});
    SetBlocks(config, {&layer.input_norm, &layer.post_norm});
    layer.linear = config.IsLinearAttentionLayer(l);
    if (layer.linear) {
      layer.linear_attention = DescribeLinearAttention(names, config, shard, l);
    } else {
      layer.attention = DescribeAttention(names, config, shard, l);
    }
    layer.moe = config.IsMoeLayer(l);
    if (layer.moe) {
      layer.experts = DescribeMoe(names, config, shard, l);
    } else {
      layer.mlp = DescribeMlp(names, config, shard, l);
    }
    m.layers.push_back(std::move(layer));
  }
  SetBlocks(config, {&m.embed, &m.final_norm, &m.lm_head});
  return m;
}

}  // namespace tandem::engine
