// The layers of the CPU forward pass. A decoder layer is a "mixer" (how tokens see each other:
// full attention now; Gated DeltaNet linear attention later) and an "ffn" (dense SwiGLU MLP or
// a routed MoE; later + shared expert), both chosen from the config at load. Each returns this
// rank's partial sum of its output projection; the model all-reduces it (two per layer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cpu/thread_pool.h"
#include "engine/kv_cache.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/step.h"

namespace tandem::engine::cpu {

// This rank's place in the tensor-parallel group.
struct Shard {
  int rank = 0;
  int world = 1;
};

// What every layer needs to know about the step: the flattened tokens of all chunks.
struct StepContext {
  const StepBatch* batch = nullptr;
  std::vector<int32_t> token_seq;  // (T) index into batch->seqs of each token
  std::vector<int32_t> token_pos;  // (T) position of each token in its sequence
  int64_t num_tokens() const { return static_cast<int64_t>(token_pos.size()); }
  ThreadPool* pool = nullptr;
  PagedKvCache* kv = nullptr;
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  // out (T, hidden) = this rank's partial output for the normed input x (T, hidden).
  virtual absl::Status Forward(StepContext& ctx, const float* x, float* out) = 0;
};

class Ffn {
 public:
  virtual ~Ffn() = default;
  // out (T, hidden) = this rank's partial output for the normed input x (T, hidden).
  virtual absl::Status Forward(StepContext& ctx, const float* x, float* out) = 0;
};

// Grouped-query self-attention over the paged KV cache, this rank's heads only.
class Attention final : public Mixer {
 public:
  // `prefix` e.g. "model.layers.3.self_attn."; `kv_layer` is this layer's index in the KV cache.
  static absl::StatusOr<std::unique_ptr<Attention>> Load(const Checkpoint& ckpt, const ModelConfig& cfg,
                                                         const std::string& prefix, Shard shard,
                                                         int64_t kv_layer);
  absl::Status Forward(StepContext& ctx, const float* x, float* out) override;

  int64_t n_heads_local() const { return n_heads_; }
  int64_t n_kv_heads_local() const { return n_kv_heads_; }

 private:
  int64_t hidden_ = 0, head_dim_ = 0, rotary_dim_ = 0;
  int64_t n_heads_ = 0, n_kv_heads_ = 0;  // this rank's q heads and kv heads
  int64_t kv_layer_ = 0;
  float eps_ = 1e-6f;
  std::vector<float> wq_;      // (n_heads * head_dim, hidden) this rank's q heads
  std::vector<float> wk_;      // (n_kv_heads * head_dim, hidden)
  std::vector<float> wv_;      // (n_kv_heads * head_dim, hidden)
  std::vector<float> wo_;      // (hidden, n_heads * head_dim) the columns of this rank's heads
  std::vector<float> q_norm_;  // (head_dim)
  std::vector<float> k_norm_;  // (head_dim)
  std::vector<float> inv_freq_;  // (rotary_dim / 2)
};

// SwiGLU MLP: W_down(silu(W_gate x) * W_up x), this rank's slice of the intermediate dimension.
struct SwigluWeights {
  int64_t hidden = 0, inter = 0;  // inter: this rank's slice
  std::vector<float> gate;  // (inter, hidden)
  std::vector<float> up;    // (inter, hidden)
  std::vector<float> down;  // (hidden, inter)

  // `prefix` e.g. "model.layers.0.mlp." or "model.layers.0.mlp.experts.7."; full_inter is the
  // unsplit intermediate size.
  static absl::StatusOr<SwigluWeights> Load(const Checkpoint& ckpt, const std::string& prefix,
                                            int64_t hidden, int64_t full_inter, Shard shard);
  // out (rows, hidden) = the partial MLP of x (rows, hidden).
  void Forward(ThreadPool& pool, const float* x, int64_t rows, float* out) const;
};

class DenseMlp final : public Ffn {
 public:
  static absl::StatusOr<std::unique_ptr<DenseMlp>> Load(const Checkpoint& ckpt, const ModelConfig& cfg,
                                                        const std::string& prefix, Shard shard);
  absl::Status Forward(StepContext& ctx, const float* x, float* out) override;

 private:
  SwigluWeights mlp_;
};

// Routed mixture of experts: router softmax -> top-k (renormalised when norm_topk_prob) ->
// weighted sum of SwiGLU experts. Every rank holds the full router (so all pick the same experts)
// and a slice of every expert's intermediate dimension.
class MoeFfn final : public Ffn {
 public:
  static absl::StatusOr<std::unique_ptr<MoeFfn>> Load(const Checkpoint& ckpt, const ModelConfig& cfg,
                                                      const std::string& prefix, Shard shard);
  absl::Status Forward(StepContext& ctx, const float* x, float* out) override;

 private:
  int64_t hidden_ = 0, num_experts_ = 0, top_k_ = 0;
  bool norm_topk_prob_ = true;
  std::vector<float> router_;            // (num_experts, hidden)
  std::vector<SwigluWeights> experts_;   // (num_experts)
};

}  // namespace tandem::engine::cpu
