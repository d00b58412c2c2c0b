// The parts of the cpu forward pass, the same parts with the same weights as the cuda backend
// (engine/cuda/layers.h; what each reads: engine/model/layer_weights.h). A decoder layer is a
// "mixer" (how tokens see each other: full attention, gated in the hybrid models, or the Gated
// DeltaNet of engine/cpu/gated_deltanet.h) and an "ffn" (dense SwiGLU MLP or a routed MoE, with a
// shared expert in the hybrid models), both chosen from the config at load. Each takes the normed
// input and returns this rank's partial sum of its output projection; the model all-reduces it
// (two per layer). The math is engine/cpu/ops.h and engine/cpu/linear_attention.h in float32.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cpu/thread_pool.h"
#include "engine/kv_cache.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config.h"
#include "engine/step.h"
#include "kernels/qk_norm_rope.h"

namespace tandem::engine::cpu {

// The cpu backend's one weight reader: a WeightSpec's slices as float32, packed, zero-padded to
// its shape (a new weight format is converted here).
absl::StatusOr<std::vector<float>> ReadWeight(const Checkpoint& ckpt, const WeightSpec& spec);
// ReadWeight of a norm: 1 + w when `zero_centered` (the hybrid models' (1 + w) * x_hat norms),
// so one RMSNorm op serves both.
absl::StatusOr<std::vector<float>> ReadNorm(const Checkpoint& ckpt, const WeightSpec& spec, bool zero_centered);

// What every part sees of the step: the flattened metadata (engine/step.h), the threads, the KV
// pool and the rotary frequencies.
struct StepContext {
  StepMeta m;
  const int32_t* meta = nullptr;  // m.total() values
  int32_t block_size = 0;
  ThreadPool* pool = nullptr;
  PagedKvCache* kv = nullptr;
  const float* inv_freq = nullptr;  // (rotary_dim / 2)
  const StepBatch* batch = nullptr;  // the step (sequence ids and chunk starts: recurrent state)
  int64_t num_tokens() const { return m.T; }
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  // out (T, hidden) = this rank's partial output for the normed input x (T, hidden).
  virtual absl::Status Forward(StepContext& ctx, const float* x, float* out) = 0;
  // Per-sequence state (the Gated DeltaNet's conv and recurrent state): this rank's bytes of one
  // slot (0: the mixer keeps none), and the pool of `slots` empty slots (re)allocated.
  virtual int64_t state_bytes_per_slot() const { return 0; }
  virtual void AllocateStates(int32_t slots) { (void)slots; }
  // Slot `dst` becomes a copy of slot `src` (StepBatch::state_copies; both inside the pool).
  virtual void CopyState(int32_t src, int32_t dst) { (void)src, (void)dst; }
};

class Ffn {
 public:
  virtual ~Ffn() = default;
  // out (T, hidden) = this rank's partial output for the normed input x (T, hidden).
  virtual absl::Status Forward(StepContext& ctx, const float* x, float* out) = 0;
};

// Grouped-query self-attention over the paged KV cache, this rank's heads only. Gated (the hybrid
// models): the output of each head multiplied by sigmoid of its gate rows before o_proj.
class Attention final : public Mixer {
 public:
  // `kv_layer` is this layer's index in the KV cache; `kv_scale` its scales in an fp8 cache (a
  // float32 or bf16 cache ignores them).
  static absl::StatusOr<std::unique_ptr<Attention>> Load(const Checkpoint& ckpt, const AttentionWeightSpec& spec,
                                                         const ModelConfig& cfg, const TpShard& shard,
                                                         int64_t kv_layer, kernels::KvScale kv_scale = {});
  absl::Status Forward(StepContext& ctx, const float* x, float* out) override;

  int64_t n_kv_heads_local() const { return L_.n_kv_heads; }

 private:
  // Stores this step's k and v and attends, in the cache's element type KV (scales only for fp8).
  template <typename KV>
  void Attend(StepContext& ctx, float* qkv, float* att, kernels::KvScale kv_scale);

  kernels::QkvLayout L_;  // this rank's q and kv heads
  int64_t hidden_ = 0, kv_layer_ = 0;
  kernels::KvScale kv_scale_;
  float eps_ = 1e-6f;
  std::vector<float> wqkv_;    // (q_dim + 2 kv_dim, hidden) q_proj, k_proj, v_proj rows of this rank
  std::vector<float> wo_;      // (hidden, q_dim) the columns of this rank's heads
  std::vector<float> q_norm_;  // (head_dim)
  std::vector<float> k_norm_;  // (head_dim)
  std::vector<float> wgate_;   // (q_dim, hidden) the output-gate rows of this rank's heads; empty: no gate
};

// SwiGLU MLP: down(silu(gate x) * up x), this rank's slice of the intermediate dimension.
class DenseMlp final : public Ffn {
 public:
  static absl::StatusOr<std::unique_ptr<DenseMlp>> Load(const Checkpoint& ckpt, const MlpWeightSpec& spec,
                                                        const ModelConfig& cfg, const TpShard& shard);
  absl::Status Forward(StepContext& ctx, const float* x, float* out) override;

 private:
  int64_t hidden_ = 0, inter_ = 0;  // inter: this rank's slice
  std::vector<float> gate_up_;      // (2 inter, hidden) gate_proj rows, then up_proj rows
  std::vector<float> down_;         // (hidden, inter)
};

// Routed mixture of experts: router softmax -> top-k (renormalised when norm_topk_prob) ->
// weighted sum of SwiGLU experts, plus (hybrid models) a shared SwiGLU expert scaled by
// sigmoid(shared_expert_gate x). Every rank holds the full router (so all pick the same experts)
// and a slice of every expert's intermediate dimension.
class MoeFfn final : public Ffn {
 public:
  static absl::StatusOr<std::unique_ptr<MoeFfn>> Load(const Checkpoint& ckpt, const MoeWeightSpec& spec,
                                                      const ModelConfig& cfg, const TpShard& shard);
  absl::Status Forward(StepContext& ctx, const float* x, float* out) override;

 private:
  int64_t hidden_ = 0, num_experts_ = 0, top_k_ = 0, inter_ = 0;  // inter: this rank's slice
  bool norm_topk_prob_ = true;
  std::vector<float> router_;   // (num_experts, hidden)
  std::vector<float> gate_up_;  // (num_experts, 2 inter, hidden)
  std::vector<float> down_;     // (num_experts, hidden, inter)
  int64_t shared_inter_ = 0;           // this rank's slice of the shared expert; 0: none
  std::vector<float> shared_gate_up_;  // (2 shared_inter, hidden)
  std::vector<float> shared_down_;     // (hidden, shared_inter)
  std::vector<float> shared_gate_;     // (hidden) shared_expert_gate, replicated
};

}  // namespace tandem::engine::cpu
