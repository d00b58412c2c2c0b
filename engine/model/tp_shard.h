// Which part of each weight one tensor-parallel rank holds, for every backend (docs/model-notes.md,
// "Tensor-parallel sharding"): q heads split evenly; kv heads split evenly when there are at least
// as many as ranks, else each rank holds the one kv head its q heads read (replicated over
// world / n_kv ranks); o_proj by the columns of the rank's q heads; every expert's and the dense
// MLP's intermediate dimension split evenly (the shared expert's too); Gated DeltaNet key heads
// split evenly with their value heads; router, norms and embedding replicated; lm_head split
// by vocabulary into ceil(vocab / world) rows per rank, the last rank's slice zero-padded.
// Pure arithmetic: the loaders (engine/model/layer_weights.h) and the benchmarks share it.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "engine/model/model_config.h"

namespace tandem::engine {

struct TpShard {
  int rank = 0, world = 1;
  int64_t q_head_start = 0, n_heads = 0;       // q heads [q_head_start, + n_heads)
  int64_t kv_head_start = 0, n_kv_heads = 0;   // kv heads [kv_head_start, + n_kv_heads)
  int64_t inter_start = 0, inter = 0;          // dense MLP intermediate rows
  int64_t moe_inter_start = 0, moe_inter = 0;  // each expert's intermediate rows
  int64_t vocab_start = 0, vocab_per_rank = 0; // lm_head rows [vocab_start, + vocab_per_rank) ...
  int64_t vocab_len = 0;                       // ... of which the first vocab_len exist (rest zero)
  // Hybrid models: Gated DeltaNet key heads split evenly, each with its n_v / n_k value heads
  // (and their conv channels, A_log, dt_bias); the shared expert's intermediate rows split evenly.
  int64_t linear_k_head_start = 0, n_linear_k_heads = 0;
  int64_t linear_v_head_start = 0, n_linear_v_heads = 0;
  int64_t shared_inter_start = 0, shared_inter = 0;
};

// Whether `config` can be split over `world` ranks as above. The errors name the dimension, e.g.
// "num_attention_heads (8) is not divisible by the tensor-parallel size 3"; an intermediate size
// is checked only when a layer uses it (dense MLP or experts).
absl::Status CheckTpShard(const ModelConfig& config, int world);

// Rank `rank`'s ranges (CheckTpShard first: this does not check divisibility).
TpShard ComputeTpShard(const ModelConfig& config, int rank, int world);

}  // namespace tandem::engine
