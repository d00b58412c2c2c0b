#include "engine/model/layer_weights.h"

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

}  // namespace

int64_t WeightSlice::numel() const {
  int64_t n = len;
  for (size_t d = 0; d < shape.size(); ++d) {
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
  return a;
}

MoeWeightSpec DescribeMoe(const WeightNames& names, const ModelConfig& config, const TpShard& shard, int64_t layer) {
  const int64_t H = config.hidden_size, E = config.num_experts, FI = config.moe_intermediate_size;
  const int64_t I = shard.moe_inter, I0 = shard.moe_inter_start;
  MoeWeightSpec m;
  m.router = Whole(names.Layer(layer, "mlp.gate.weight"), {E, H});
  m.gate_up.shape = {E, 2 * I, H};
  m.down.shape = {E, H, I};
  for (int64_t e = 0; e < E; ++e) {
    m.gate_up.slices.push_back(Slice(names.Expert(layer, e, "gate_proj"), {FI, H}, 0, I0, I));
    m.gate_up.slices.push_back(Slice(names.Expert(layer, e, "up_proj"), {FI, H}, 0, I0, I));
    m.down.slices.push_back(Slice(names.Expert(layer, e, "down_proj"), {H, FI}, 1, I0, I));
  }
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
    layer.attention = DescribeAttention(names, config, shard, l);
    layer.moe = config.IsMoeLayer(l);
    if (layer.moe) {
      layer.experts = DescribeMoe(names, config, shard, l);
    } else {
      layer.mlp = DescribeMlp(names, config, shard, l);
    }
    m.layers.push_back(std::move(layer));
  }
  return m;
}

}  // namespace tandem::engine
