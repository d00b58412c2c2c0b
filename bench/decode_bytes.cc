#include "bench/decode_bytes.h"

#include "common/status.h"
#include "engine/model/layer_weights.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"

namespace tandem::bench {

using namespace engine;  // the model description types
using kernels::QuantMatrix;
using kernels::WeightFormat;

namespace {

// A weight that is not described (the output gate of an ungated attention) has no slices and the
// empty shape, whose product would be 1: it counts 0.
int64_t Elems(const WeightSpec& w) { return w.shape.empty() ? 0 : w.numel(); }

// The QuantMatrix layout of one rank's linear (rows, cols) or stack (count, rows, cols) in
// `format`, with the checkpoint's scales indexed for this shard as kernels/quant_weight.h says: FP8
// keeps one scale row per block when every packed row slice starts on a block of its tensor and on
// a block of the packed matrix, else one scale row per weight row; a column slice's first column
// gives the phase of the scale columns.
absl::StatusOr<QuantMatrix> QuantLayout(const WeightSpec& w, WeightFormat format) {
  const size_t n = w.shape.size();
  QuantMatrix q =
      QuantMatrix::Layout(format, n == 3 ? w.shape[0] : 1, w.shape.at(n - 2), w.shape.at(n - 1), kFp8Block, kFp8Block);
  if (format == WeightFormat::kNvfp4 && q.cols % kernels::kNvfp4GroupSize != 0) {
    return absl::InvalidArgumentError("bench: nvfp4 needs a multiple of 16 columns per rank; " +
                                      w.slices.at(0).name + " has " + std::to_string(q.cols) + " here");
  }
  if (format != WeightFormat::kFp8Block) return q;
  int64_t packed = 0;  // rows of the stack before this slice
  for (const WeightSlice& s : w.slices) {
    const int row_dim = s.index >= 0 ? 1 : 0;
    if (s.dim == row_dim) {
      if (s.start % kFp8Block != 0 || (packed % q.rows) % kFp8Block != 0) q.row_block = 1;
      packed += s.len;
    } else {
      q.col_phase = s.start % kFp8Block;
      packed += s.shape.at(row_dim);
    }
  }
  return q;
}

// Device bytes of one weight: a linear the checkpoints quantize in `format`, anything else bf16.
absl::StatusOr<int64_t> Bytes(const WeightSpec& w, WeightFormat format, bool quantizable) {
  if (!quantizable || format == WeightFormat::kBf16 || w.shape.empty()) {
    return static_cast<int64_t>(kBf16Bytes) * Elems(w);
  }
  ASSIGN_OR_RETURN(const QuantMatrix q, QuantLayout(w, format));
  return q.count * q.matrix_bytes();
}

// Adds a weight's elements and bytes to one part.
struct PartAdder {
  DecodeReadModel& m;
  absl::Status Add(int64_t WeightParts::*part, const WeightSpec& w, bool quantizable) {
    ASSIGN_OR_RETURN(const int64_t b, Bytes(w, m.format, quantizable));
    m.params.*part += Elems(w);
    m.bytes.*part += b;
    return absl::OkStatus();
  }
};

}  // namespace

std::string WeightsDescription(WeightFormat format) {
  const char* rest =
      ": attention q/k/v/o, DeltaNet in_proj qkv/z and out_proj, experts, shared expert, dense MLP; "
      "embedding, lm_head, routers, gates, norms, conv bf16";
  switch (format) {
    case WeightFormat::kFp8Block:
      return "random fp8 weights (block 128 x 128, e4m3 with a float32 scale per block)" + std::string(rest);
    case WeightFormat::kNvfp4:
      return "random nvfp4 weights (e2m1, an e4m3 scale per 16 columns, a float32 scale per row)" + std::string(rest);
    case WeightFormat::kBf16:
    default:
      return "random bf16 weights";
  }
}

int64_t WeightParts::Fixed() const { return attention + deltanet + norms + routers + shared_experts + dense_mlps + lm_head; }

int64_t DecodeReadModel::TotalParams() const {
  return params.Fixed() + moe_layers * num_experts * params.expert + (tied ? 0 : params.embed);
}

int64_t DecodeReadModel::ActiveParams() const {
  return TotalParams() - moe_layers * (num_experts - experts_per_tok) * params.expert;
}

int64_t DecodeReadModel::TotalBytes() const {
  return bytes.Fixed() + moe_layers * num_experts * bytes.expert + (tied ? 0 : bytes.embed);
}

absl::StatusOr<DecodeReadModel> DescribeDecodeReads(const ModelConfig& config, int rank, int world,
                                                    WeightFormat format) {
  RETURN_IF_ERROR(CheckTpShard(config, world));
  const TpShard shard = ComputeTpShard(config, rank, world);
  // Only shapes are used: the names are the text-only layout's, whatever the checkpoint's.
  const WeightNames names{kTextPrefix, config.tie_word_embeddings};
  const ModelWeightSpec spec = DescribeWeights(names, config, shard);

  DecodeReadModel m;
  m.format = format;
  m.num_experts = config.num_experts;
  m.experts_per_tok = config.num_experts_per_tok;
  m.hidden = config.hidden_size;
  m.tied = config.tie_word_embeddings;
  PartAdder add{m};
  constexpr bool kQuant = true, kBf16 = false;
  RETURN_IF_ERROR(add.Add(&WeightParts::embed, spec.embed, kBf16));
  RETURN_IF_ERROR(add.Add(&WeightParts::lm_head, spec.lm_head, kBf16));
  RETURN_IF_ERROR(add.Add(&WeightParts::norms, spec.final_norm, kBf16));
  for (const LayerWeightSpec& l : spec.layers) {
    RETURN_IF_ERROR(add.Add(&WeightParts::norms, l.input_norm, kBf16));
    RETURN_IF_ERROR(add.Add(&WeightParts::norms, l.post_norm, kBf16));
    if (l.linear) {
      const LinearAttentionWeightSpec& a = l.linear_attention;
      ++m.linear_attention_layers;
      for (const WeightSpec* w : {&a.in_qkv, &a.in_z, &a.out}) {
        RETURN_IF_ERROR(add.Add(&WeightParts::deltanet, *w, kQuant));
      }
      for (const WeightSpec* w : {&a.in_b, &a.in_a, &a.conv, &a.a_log, &a.dt_bias, &a.norm}) {
        RETURN_IF_ERROR(add.Add(&WeightParts::deltanet, *w, kBf16));
      }
      // conv.shape = {this rank's conv channels, kernel}: the state keeps kernel - 1 inputs per
      // channel; a_log.shape = {this rank's value heads}, each with a dk x dv state.
      const int64_t channels = a.conv.shape.at(0), kernel = a.conv.shape.at(1), n_v = a.a_log.shape.at(0);
      m.state_per_seq += channels * (kernel - 1) + n_v * config.linear_key_head_dim * config.linear_value_head_dim;
    } else {
      const AttentionWeightSpec& a = l.attention;
      ++m.full_attention_layers;
      for (const WeightSpec* w : {&a.wqkv, &a.gate, &a.wo}) RETURN_IF_ERROR(add.Add(&WeightParts::attention, *w, kQuant));
      for (const WeightSpec* w : {&a.q_norm, &a.k_norm}) RETURN_IF_ERROR(add.Add(&WeightParts::attention, *w, kBf16));
    }
    if (l.moe) {
      const MoeWeightSpec& e = l.experts;
      ++m.moe_layers;
      RETURN_IF_ERROR(add.Add(&WeightParts::routers, e.router, kBf16));
      // gate_up (E, 2 I, H) and down (E, H, I): one expert is 1/E of both (the same in every layer).
      DecodeReadModel experts;
      experts.format = format;
      PartAdder stack{experts};
      RETURN_IF_ERROR(stack.Add(&WeightParts::expert, e.gate_up, kQuant));
      RETURN_IF_ERROR(stack.Add(&WeightParts::expert, e.down, kQuant));
      m.params.expert = experts.params.expert / config.num_experts;
      m.bytes.expert = experts.bytes.expert / config.num_experts;
      if (e.shared) {
        const SharedExpertWeightSpec& s = e.shared_expert;
        RETURN_IF_ERROR(add.Add(&WeightParts::shared_experts, s.gate_up, kQuant));
        RETURN_IF_ERROR(add.Add(&WeightParts::shared_experts, s.down, kQuant));
        RETURN_IF_ERROR(add.Add(&WeightParts::shared_experts, s.gate, kBf16));
      }
    } else {
      ++m.mlp_layers;
      RETURN_IF_ERROR(add.Add(&WeightParts::dense_mlps, l.mlp.gate_up, kQuant));
      RETURN_IF_ERROR(add.Add(&WeightParts::dense_mlps, l.mlp.down, kQuant));
    }
  }
  return m;
}

StepBytes DecodeStepBytes(const DecodeReadModel& m, int batch, double avg_ctx, double distinct_experts_per_layer,
                          double kv_bytes_per_token, double state_bytes_per_seq) {
  StepBytes b;
  b.weights = static_cast<double>(m.bytes.Fixed());
  b.experts = distinct_experts_per_layer * static_cast<double>(m.moe_layers * m.bytes.expert);
  b.embed = kBf16Bytes * batch * static_cast<double>(m.hidden);
  b.kv = batch * avg_ctx * kv_bytes_per_token;
  b.state = 2.0 * batch * state_bytes_per_seq;
  return b;
}

}  // namespace tandem::bench
