#include "engine/model/tp_shard.h"

#include <algorithm>
#include <string>

namespace tandem::engine {

namespace {

absl::Status Indivisible(const std::string& what, int64_t n, int world) {
  return absl::InvalidArgumentError(what + " (" + std::to_string(n) +
                                    ") is not divisible by the tensor-parallel size " + std::to_string(world));
}

}  // namespace

absl::Status CheckTpShard(const ModelConfig& config, int world) {
  if (world < 1) return absl::InvalidArgumentError("tensor-parallel size must be >= 1");
  const int64_t nh = config.num_attention_heads, nkv = config.num_key_value_heads;
  if (nh % world != 0) return Indivisible("num_attention_heads", nh, world);
  if (nkv <= 0 || (nkv >= world ? nkv % world : world % nkv) != 0) {
    return absl::InvalidArgumentError("num_key_value_heads (" + std::to_string(nkv) + ") and the tensor-parallel size " +
                                      std::to_string(world) + " must divide one another");
  }
  // Local q head h reads local kv head h / (n_heads / n_kv_heads): whole groups per kv head.
  if (nh % nkv != 0) {
    return absl::InvalidArgumentError("num_attention_heads " + std::to_string(nh) +
                                      " is not a multiple of num_key_value_heads " + std::to_string(nkv));
  }
  bool moe = false, dense = false;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) (config.IsMoeLayer(l) ? moe : dense) = true;
  if (moe && config.moe_intermediate_size % world != 0) {
    return Indivisible("moe_intermediate_size", config.moe_intermediate_size, world);
  }
  if (dense && config.intermediate_size % world != 0) {
    return Indivisible("intermediate_size", config.intermediate_size, world);
  }
  if (moe && config.shared_expert_intermediate_size % world != 0) {
    return Indivisible("shared_expert_intermediate_size", config.shared_expert_intermediate_size, world);
  }
  bool linear = false;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) linear |= config.IsLinearAttentionLayer(l);
  if (linear && config.linear_num_key_heads % world != 0) {
    return Indivisible("linear_num_key_heads", config.linear_num_key_heads, world);
  }
  return absl::OkStatus();
}

TpShard ComputeTpShard(const ModelConfig& config, int rank, int world) {
  TpShard s;
  s.rank = rank;
  s.world = world;
  const int64_t r = rank, W = world, nkv = config.num_key_value_heads, V = config.vocab_size;
  s.n_heads = config.num_attention_heads / W;
  s.q_head_start = r * s.n_heads;
  if (nkv >= W) {
    s.n_kv_heads = nkv / W;
    s.kv_head_start = r * s.n_kv_heads;
  } else {
    s.n_kv_heads = 1;
    s.kv_head_start = r * nkv / W;  // = (first q head of rank r) / (n_heads / n_kv_heads)
  }
  s.inter = config.intermediate_size / W;
  s.inter_start = r * s.inter;
  s.moe_inter = config.moe_intermediate_size / W;
  s.moe_inter_start = r * s.moe_inter;
  s.shared_inter = config.shared_expert_intermediate_size / W;
  s.shared_inter_start = r * s.shared_inter;
  s.n_linear_k_heads = config.linear_num_key_heads / W;
  s.linear_k_head_start = r * s.n_linear_k_heads;
  if (config.linear_num_key_heads > 0) {
    const int64_t per_key = config.linear_num_value_heads / config.linear_num_key_heads;
    s.n_linear_v_heads = s.n_linear_k_heads * per_key;
    s.linear_v_head_start = s.linear_k_head_start * per_key;
  }
  s.vocab_per_rank = (V + W - 1) / W;
  s.vocab_start = r * s.vocab_per_rank;
  s.vocab_len = std::max<int64_t>(0, std::min(V, s.vocab_start + s.vocab_per_rank) - s.vocab_start);
  return s;
}

}  // namespace tandem::engine
