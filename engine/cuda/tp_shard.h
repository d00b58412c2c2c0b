// Which part of each weight one tensor-parallel rank holds, exactly as engine/cpu shards them
// (docs/model-notes.md, "Tensor-parallel sharding"): q heads split evenly; kv heads split evenly when
// there are at least as many as ranks, else each rank holds the one kv head its q heads read
// (replicated over world / n_kv ranks); o_proj by the columns of the rank's q heads; every
// expert's and the dense MLP's intermediate dimension split evenly; router, norms and embedding
// replicated; lm_head split by vocabulary into ceil(vocab / world) rows per rank, the last rank's
// slice zero-padded. Pure arithmetic (no CUDA): the cuda loader and a CPU unit test share it.
// Divisibility is checked by cuda::CheckSupported, not here.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem::engine::cuda {

struct TpShard {
  int64_t q_head_start = 0, n_heads = 0;      // q heads [q_head_start, + n_heads)
  int64_t kv_head_start = 0, n_kv_heads = 0;  // kv heads [kv_head_start, + n_kv_heads)
  int64_t inter_start = 0, inter = 0;          // dense MLP intermediate rows
  int64_t moe_inter_start = 0, moe_inter = 0;  // each expert's intermediate rows
  int64_t vocab_start = 0, vocab_per_rank = 0; // lm_head rows [vocab_start, + vocab_per_rank) ...
  int64_t vocab_len = 0;                       // ... of which the first vocab_len exist (rest zero)
};

inline TpShard ComputeTpShard(int64_t n_heads, int64_t n_kv_heads, int64_t intermediate, int64_t moe_intermediate,
                              int64_t vocab, int rank, int world) {
  TpShard s;
  const int64_t r = rank, W = world;
  s.n_heads = n_heads / W;
  s.q_head_start = r * s.n_heads;
  if (n_kv_heads >= W) {
    s.n_kv_heads = n_kv_heads / W;
    s.kv_head_start = r * s.n_kv_heads;
  } else {
    s.n_kv_heads = 1;
    s.kv_head_start = r * n_kv_heads / W;  // = (first q head of rank r) / (n_heads / n_kv_heads)
  }
  s.inter = intermediate / W;
  s.inter_start = r * s.inter;
  s.moe_inter = moe_intermediate / W;
  s.moe_inter_start = r * s.moe_inter;
  s.vocab_per_rank = (vocab + W - 1) / W;
  s.vocab_start = r * s.vocab_per_rank;
  s.vocab_len = std::max<int64_t>(0, std::min(vocab, s.vocab_start + s.vocab_per_rank) - s.vocab_start);
  return s;
}

}  // namespace tandem::engine::cuda
