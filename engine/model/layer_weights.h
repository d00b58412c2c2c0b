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
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"

namespace tandem::engine {

// Rows (dim 0) or columns (dim 1) [start, start + len) of a stored tensor of `shape` (1-D: dim 0).
struct WeightSlice {
  std::string name;
  std::vector<int64_t> shape;  // as stored (checked when read)
  int dim = 0;
  int64_t start = 0, len = 0;
  int64_t numel() const;       // of the slice
};

// One weight of a part on this rank: its slices packed one after another (row-major), then zeros
// up to `shape`'s size (only a last rank's lm_head rows past the vocabulary).
struct WeightSpec {
  std::vector<int64_t> shape;
  std::vector<WeightSlice> slices;
  int64_t numel() const;
};

struct AttentionWeightSpec {
  WeightSpec wqkv, wo, q_norm, k_norm;
};
struct MoeWeightSpec {
  WeightSpec router, gate_up, down;
};
struct MlpWeightSpec {
  WeightSpec gate_up, down;
};
// A decoder layer: h = x + mixer(input_norm(x)); out = h + ffn(post_norm(h)).
struct LayerWeightSpec {
  WeightSpec input_norm, post_norm;
  AttentionWeightSpec attention;  // the mixer (full attention: every layer for now)
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
MoeWeightSpec DescribeMoe(const WeightNames& names, const ModelConfig& config, const TpShard& shard, int64_t layer);
MlpWeightSpec DescribeMlp(const WeightNames& names, const ModelConfig& config, const TpShard& shard, int64_t layer);
// Every part of the model (CheckTpShard(config, shard.world) first).
ModelWeightSpec DescribeWeights(const WeightNames& names, const ModelConfig& config, const TpShard& shard);

}  // namespace tandem::engine
