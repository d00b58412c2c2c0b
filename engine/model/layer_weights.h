// What each part of the model reads from the checkpoint on one tensor-parallel rank, the same for
// every backend: a description (names, stored shapes, shard slices), no I/O. Each backend has one
// reader that turns a WeightSpec into its own storage (cpu: float32 through Checkpoint::ReadSlice;
// cuda: a bf16 upload); a new weight format (FP8 / NVFP4 scales) changes those readers, a new
// layer type (Gated DeltaNet) adds a spec here and a part per backend.
//
// The parts and their weights, with the names both backends use for their members:
//   model:     embed (vocab, H) replicated; final_norm (H); lm_head (vocab_per_rank, H) this rank's
//              rows of the vocabulary (the last rank's padded with zeros; the embedding when tied)
//   layer:     input_norm, post_norm (H)
//   attention: wqkv (q_dim + 2 kv_dim, H) = this rank's q_proj, k_proj, v_proj rows one after the
//              other; wo (H, q_dim) the o_proj columns of this rank's heads; q_norm, k_norm (head_dim)
//   moe:       router (E, H) replicated; gate_up (E, 2 I, H) = each expert's gate_proj then up_proj
//              rows of this rank's slice I of the intermediate dimension; down (E, H, I) its columns
//   mlp:       gate_up (2 I, H), down (H, I), I this rank's slice of intermediate_size
// Experts are read from per-expert tensors or from fused ones (mlp.experts.gate_up_proj [E, 2 FI, H],
// gate rows first; mlp.experts.down_proj [E, H, FI]): the same packed layout either way (slices
// with `index` = the expert).
// The hybrid models (qwen3_next, qwen3_5_moe) add, in the same packed-per-rank style:
//   attention: gate (q_dim, H) the output-gate rows of this rank's q heads, when
//              config.attention_output_gate (q_proj then holds [q_h; gate_h] per head, 2 hd rows)
//   linear:    (Gated DeltaNet, DescribeLinearAttention) this rank's key heads [k0, k0 + nk) and
//              their value heads [v0, v0 + nv), nv = nk * n_v / n_k:
//              in_qkv (2 nk dk + nv dv, H) = q rows of its key heads, then k rows, then v rows
//              (the conv channel order); in_z (nv dv, H); in_b, in_a (nv, H);
//              conv (2 nk dk + nv dv, W) the conv1d.weight [C, 1, W] rows of the same channels;
//              a_log, dt_bias (nv); norm (dv) replicated; out (H, nv dv) out_proj's columns.
//              Qwen3.5 stores in_proj_qkv / in_proj_z / in_proj_b / in_proj_a; Qwen3-Next fuses
//              in_proj_qkvz ([q dk | k dk | v r dv | z r dv] per key head, r = n_v / n_k) and
//              in_proj_ba ([b r | a r] per key head): both are described into the layout above.
//   shared:    (shared expert) gate_up (2 S, H), down (H, S), S this rank's slice of
//              shared_expert_intermediate_size; gate (1, H) shared_expert_gate replicated.
// Norms are described as stored; with config.zero_centered_norms the backend uses 1 + w for the
// input, post-attention, final and q/k norms (not linear.norm).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"

namespace tandem::engine {

// Rows (dim 0) or columns (dim 1) [start, start + len) of a stored tensor of `shape` (1-D: dim 0).
// With index >= 0, the tensor is a stack ([E, rows, cols]): the slice is taken from entry `index`
// of dim 0, `dim` (1 or 2) counting the stored dims.
struct WeightSlice {
  std::string name;
  std::vector<int64_t> shape;  // as stored (checked when read)
  int dim = 0;
  int64_t start = 0, len = 0;
  int64_t index = -1;
  // config.weight_block_size of a block-scaled FP8 checkpoint (0 otherwise): the [out, in] block
  // of one scale, used when the tensor has a weight_scale_inv beside it.
  int64_t block_out = 0, block_in = 0;
  int64_t numel() const;       // of the slice
};

// Reads one slice as float32 (Checkpoint::ReadSlice, or ReadIndexedSlice when s.index >= 0).
// A weight `X.weight` with `X.weight_scale_inv` beside it (block-scaled FP8) is dequantized:
// W[o][i] = stored[o][i] * scale_inv[o / block_out][i / block_in], each element taking the scale
// of the block it belongs to wherever the slice starts or ends (a TP split may cut a block).
// The scale must be [ceil(out / block_out), ceil(in / block_in)] ([E, ...] for a stack), else
// InvalidArgument naming both tensors; so is a weight stored wider than F8_E4M3 with such scales
// beside it (neither format). A weight with `X.weight_scale` and `X.weight_scale_2`
// beside it is NVFP4 and read by ReadNvfp4Slice (engine/model/nvfp4.h).
absl::StatusOr<Tensor> ReadWeightSlice(const Checkpoint& ckpt, const WeightSlice& s);

// One weight of a part on this rank: its slices packed one after another (row-major), then zeros
// up to `shape`'s size (only a last rank's lm_head rows past the vocabulary).
struct WeightSpec {
  std::vector<int64_t> shape;
  std::vector<WeightSlice> slices;
  int64_t numel() const;
};

struct AttentionWeightSpec {
  WeightSpec wqkv, wo, q_norm, k_norm;
  WeightSpec gate;  // empty (no slices, shape {}) unless config.attention_output_gate
};
struct LinearAttentionWeightSpec {
  WeightSpec in_qkv, in_z, in_b, in_a, conv, a_log, dt_bias, norm, out;
};
struct SharedExpertWeightSpec {
  WeightSpec gate_up, down, gate;
};
struct MoeWeightSpec {
  WeightSpec router, gate_up, down;
  bool shared = false;  // shared_expert_intermediate_size > 0: `shared_expert` is described
  SharedExpertWeightSpec shared_expert;
};
struct MlpWeightSpec {
  WeightSpec gate_up, down;
};
// A decoder layer: h = x + mixer(input_norm(x)); out = h + ffn(post_norm(h)).
struct LayerWeightSpec {
  WeightSpec input_norm, post_norm;
  bool linear = false;            // the mixer: `linear_attention` when true, else `attention`
  AttentionWeightSpec attention;
  LinearAttentionWeightSpec linear_attention;
  bool moe = false;               // the ffn: `experts` when true, else `mlp`
  MoeWeightSpec experts;
  MlpWeightSpec mlp;
};
struct ModelWeightSpec {
  WeightSpec embed, final_norm, lm_head;
  std::vector<LayerWeightSpec> layers;
};

AttentionWeightSpec DescribeAttention(const WeightNames& names, const ModelConfig& config, const TpShard& shard,
                                      int64_t layer);
// A Gated DeltaNet layer on this rank (TpShard's linear key/value heads).
LinearAttentionWeightSpec DescribeLinearAttention(const WeightNames& names, const ModelConfig& config,
                                                  const TpShard& shard, int64_t layer);
SharedExpertWeightSpec DescribeSharedExpert(const WeightNames& names, const ModelConfig& config,
                                            const TpShard& shard, int64_t layer);
MoeWeightSpec DescribeMoe(const WeightNames& names, const ModelConfig& config, const TpShard& shard, int64_t layer);
MlpWeightSpec DescribeMlp(const WeightNames& names, const ModelConfig& config, const TpShard& shard, int64_t layer);
// Every part of the model (CheckTpShard(config, shard.world) first).
ModelWeightSpec DescribeWeights(const WeightNames& names, const ModelConfig& config, const TpShard& shard);

}  // namespace tandem::engine
