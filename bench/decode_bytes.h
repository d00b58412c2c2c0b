// What one decode step must read on one tensor-parallel rank, by part: the floor a memory-bound
// step is compared with (bench/decode_bench.cc divides it by the step time for GB/s). The weight
// parts are counted from what the rank holds (engine/model/layer_weights.h DescribeWeights, each
// WeightSpec's numel), not from per-model formulas, so any model the loader describes (qwen3_moe,
// the hybrids, a new layer type) is counted right; in bytes, each quantized linear as the layout
// kernels/quant_weight.h describes for that shard (data and scales). No GPU: the CPU tests check it.
//
// A decode step of B sequences at context c reads:
//   every weight of the mixers (full attention with its gate rows; Gated DeltaNet in_proj rows,
//   conv, A_log, dt_bias, norm, out_proj), norms, routers, shared experts with their gates, dense
//   MLPs and this rank's lm_head rows, once; the distinct routed experts the router picked (the
//   benchmark measures how many per layer), once each; one embedding row per sequence; each
//   sequence's KV of the full-attention layers; and each sequence's recurrent state (conv state +
//   the delta-rule state S of every Gated DeltaNet layer), read and written back.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "kernels/quant_weight.h"

namespace tandem::bench {

// Unquantized weights are bf16 on the GPU (2 bytes per element, norms and gates included); the
// recurrent state is float32 (kernels/gated_deltanet.h, engine/cpu/gated_deltanet.h).
inline constexpr double kBf16Bytes = 2.0;
inline constexpr double kStateBytes = 4.0;
// The FP8 scale block of the synthetic weights (and of Qwen's -FP8 releases): 128 x 128.
inline constexpr int64_t kFp8Block = 128;

// The weights of a quantized model that stay bf16 and those in the format, as the published FP8
// and NVFP4 checkpoints have them. Quantized: full attention's q (with the output-gate rows), k, v
// and o; the Gated DeltaNet's in_proj qkv and z and out_proj; every routed expert's and the shared
// expert's gate, up and down; a dense MLP. bf16: embedding, lm_head, routers, the shared expert's
// gate, norms, the DeltaNet's in_proj b and a, conv, A_log, dt_bias.
// One line for the report: "random fp8 weights (block 128 x 128) ...".
std::string WeightsDescription(kernels::WeightFormat format);

// Sizes of this rank's weights by part, in elements (DecodeReadModel::params) or in device bytes
// (DecodeReadModel::bytes).
struct WeightParts {
  int64_t attention = 0;       // full-attention layers: wqkv (+ output-gate rows), wo, q/k norms
  int64_t deltanet = 0;        // Gated DeltaNet layers: in_qkv, in_z, in_b, in_a, conv, A_log, dt_bias, norm, out
  int64_t norms = 0;           // every layer's input and post-attention norm, and the final norm
  int64_t routers = 0;
  int64_t shared_experts = 0;  // every MoE layer's shared expert: gate_up, down and its sigmoid gate
  int64_t dense_mlps = 0;
  int64_t expert = 0;          // ONE routed expert of one MoE layer: its gate_up and down rows here
  int64_t lm_head = 0;         // this rank's rows (the last rank's padding included)
  int64_t embed = 0;           // the whole (replicated) embedding

  // What every step reads whatever the routing: all of the above but the routed experts and the
  // embedding.
  int64_t Fixed() const;
};

// This rank's weights in one format.
struct DecodeReadModel {
  kernels::WeightFormat format = kernels::WeightFormat::kBf16;
  int64_t full_attention_layers = 0, linear_attention_layers = 0, moe_layers = 0, mlp_layers = 0;
  int64_t num_experts = 0, experts_per_tok = 0;
  WeightParts params;  // elements
  // Device bytes: a quantized linear's data and every scale array (QuantMatrix::matrix_bytes of
  // the layout a checkpoint of these shapes loads into), 2 bytes an element for the rest.
  WeightParts bytes;
  int64_t hidden = 0;          // one embedding row (elements)
  bool tied = false;           // lm_head is the embedding (counted once in the parameters)
  // Float32 elements of one sequence's state on this rank: every DeltaNet layer's conv state
  // (conv channels x (kernel - 1)) and delta-rule state (value heads x dk x dv).
  int64_t state_per_seq = 0;

  // The text model's parameters (at world 1: the checkpoint's, without MTP head or vision tower).
  int64_t TotalParams() const;
  // Parameters one token uses: all but the (num_experts - experts_per_tok) unchosen experts per
  // MoE layer, the embedding counted whole (the convention of Qwen's "3.3B activated").
  int64_t ActiveParams() const;
  // The device bytes of all of this rank's weights (what must fit in its GPU).
  int64_t TotalBytes() const;
  double StateBytesPerSeq() const { return kStateBytes * static_cast<double>(state_per_seq); }
};

// The parts of `config` on rank `rank` of `world`, the quantized linears in `format`
// (InvalidArgument when it does not split, or when an NVFP4 linear's columns on this rank are not
// a multiple of 16, naming it).
absl::StatusOr<DecodeReadModel> DescribeDecodeReads(const engine::ModelConfig& config, int rank, int world,
                                                    kernels::WeightFormat format = kernels::WeightFormat::kBf16);

// The bytes of one decode step, by part.
struct StepBytes {
  double weights = 0;  // bytes.Fixed()
  double experts = 0;  // distinct experts per layer x MoE layers x one expert's bytes
  double embed = 0;    // one bf16 row per sequence
  double kv = 0;       // batch x average context x KV bytes per token (full-attention layers)
  double state = 0;    // batch x state bytes per sequence x 2 (read, then written back)
  double total() const { return weights + experts + embed + kv + state; }
};

// `avg_ctx`: the mean number of positions each sequence's attention reads during the timed steps;
// `kv_bytes_per_token`: this rank's KV bytes of one position (engine KvCacheSpec::bytes_per_token,
// full-attention layers only); `state_bytes_per_seq`: this rank's state of one sequence (the
// engine's KvCacheSpec::state_bytes_per_slot, or m.StateBytesPerSeq()).
StepBytes DecodeStepBytes(const DecodeReadModel& m, int batch, double avg_ctx, double distinct_experts_per_layer,
                          double kv_bytes_per_token, double state_bytes_per_seq);

}  // namespace tandem::bench
