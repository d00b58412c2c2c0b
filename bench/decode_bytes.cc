#include "bench/decode_bytes.h"

#include "common/status.h"
#include "engine/model/layer_weights.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"

namespace tandem::bench {

using namespace engine;  // the model description types

namespace {

// A weight that is not described (the output gate of an ungated attention) has no slices and the
// empty shape, whose product would be 1: it counts 0.
int64_t Elems(const WeightSpec& w) { return w.shape.empty() ? 0 : w.numel(); }

}  // namespace

int64_t DecodeReadModel::FixedWeights() const {
  return attention + deltanet + norms + routers + shared_experts + dense_mlps + lm_head;
}

int64_t DecodeReadModel::TotalParams() const {
  return FixedWeights() + moe_layers * num_experts * expert + (tied ? 0 : embed);
}

int64_t DecodeReadModel::ActiveParams() const {
  return TotalParams() - moe_layers * (num_experts - experts_per_tok) * expert;
}

absl::StatusOr<DecodeReadModel> DescribeDecodeReads(const ModelConfig& config, int rank, int world) {
  RETURN_IF_ERROR(CheckTpShard(config, world));
  const TpShard shard = ComputeTpShard(config, rank, world);
  // Only shapes are used: the names are the text-only layout's, whatever the checkpoint's.
  const WeightNames names{kTextPrefix, config.tie_word_embeddings};
  const ModelWeightSpec spec = DescribeWeights(names, config, shard);

  DecodeReadModel m;
  m.num_experts = config.num_experts;
  m.experts_per_tok = config.num_experts_per_tok;
  m.hidden = config.hidden_size;
  m.tied = config.tie_word_embeddings;
  m.embed = Elems(spec.embed);
  m.lm_head = Elems(spec.lm_head);
  m.norms = Elems(spec.final_norm);
  for (const LayerWeightSpec& l : spec.layers) {
    m.norms += Elems(l.input_norm) + Elems(l.post_norm);
    if (l.linear) {
      const LinearAttentionWeightSpec& a = l.linear_attention;
      ++m.linear_attention_layers;
      m.deltanet += Elems(a.in_qkv) + Elems(a.in_z) + Elems(a.in_b) + Elems(a.in_a) + Elems(a.conv) +
                    Elems(a.a_log) + Elems(a.dt_bias) + Elems(a.norm) + Elems(a.out);
      // conv.shape = {this rank's conv channels, kernel}: the state keeps kernel - 1 inputs per
      // channel; a_log.shape = {this rank's value heads}, each with a dk x dv state.
      const int64_t channels = a.conv.shape.at(0), kernel = a.conv.shape.at(1), n_v = a.a_log.shape.at(0);
      m.state_per_seq += channels * (kernel - 1) + n_v * config.linear_key_head_dim * config.linear_value_head_dim;
    } else {
      const AttentionWeightSpec& a = l.attention;
      ++m.full_attention_layers;
      m.attention += Elems(a.wqkv) + Elems(a.gate) + Elems(a.wo) + Elems(a.q_norm) + Elems(a.k_norm);
    }
    if (l.moe) {
      const MoeWeightSpec& e = l.experts;
      ++m.moe_layers;
      m.routers += Elems(e.router);
      // gate_up (E, 2 I, H) and down (E, H, I): one expert is 1/E of both.
      m.expert = (Elems(e.gate_up) + Elems(e.down)) / config.num_experts;
      if (e.shared) {
        m.shared_experts += Elems(e.shared_expert.gate_up) + Elems(e.shared_expert.down) + Elems(e.shared_expert.gate);
      }
    } else {
      ++m.mlp_layers;
      m.dense_mlps += Elems(l.mlp.gate_up) + Elems(l.mlp.down);
    }
  }
  return m;
}

StepBytes DecodeStepBytes(const DecodeReadModel& m, int batch, double avg_ctx, double distinct_experts_per_layer,
                          double kv_bytes_per_token, double state_bytes_per_seq) {
  StepBytes b;
  b.weights = kWeightBytes * static_cast<double>(m.FixedWeights());
  b.experts = kWeightBytes * distinct_experts_per_layer * static_cast<double>(m.moe_layers * m.expert);
  b.embed = kWeightBytes * batch * static_cast<double>(m.hidden);
  b.kv = batch * avg_ctx * kv_bytes_per_token;
  b.state = 2.0 * batch * state_bytes_per_seq;
  return b;
}

}  // namespace tandem::bench
