// The Gated DeltaNet mixer of the hybrid models (Qwen3-Next, Qwen3.5-MoE; docs/model-notes.md),
// this rank's heads, with a pool of state slots (conv and recurrent state), one per running
// sequence (SeqChunk::state_slot). Prefill runs the recurrence token by token (the reference);
// decode is the same step. The math: engine/cpu/linear_attention.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/layers.h"
#include "engine/cpu/linear_attention.h"

namespace tandem::engine::cpu {

// This rank's DeltaNet weights in float32, heads of the rank only (key head i with its value heads).
struct DeltaNetWeights {
  std::vector<float> in_qkv;   // (conv_dim, H) rows q (n_k dk) | k (n_k dk) | v (n_v dv)
  std::vector<float> in_z;     // (n_v dv, H)
  std::vector<float> in_b;     // (n_v, H)
  std::vector<float> in_a;     // (n_v, H)
  std::vector<float> conv;     // (conv_dim, K) the depthwise conv1d, channels as in_qkv's rows
  std::vector<float> A_log;    // (n_v)
  std::vector<float> dt_bias;  // (n_v)
  std::vector<float> norm;     // (dv) the gated output norm (plain w)
  std::vector<float> out;      // (H, n_v dv) out_proj's columns of this rank's value heads
};

class GatedDeltaNet final : public Mixer {
 public:
  // This rank's heads of a checkpoint's layer (engine/model/layer_weights.h describes both the
  // Qwen3.5 and the fused Qwen3-Next layouts into DeltaNetWeights' order).
  static absl::StatusOr<std::unique_ptr<GatedDeltaNet>> Load(const Checkpoint& ckpt,
                                                             const LinearAttentionWeightSpec& spec,
                                                             const ModelConfig& cfg, const TpShard& shard);
  // Checks every weight's size against the shape.
  static absl::StatusOr<std::unique_ptr<GatedDeltaNet>> Create(DeltaNetWeights w, const DeltaNetLayout& shape,
                                                               int64_t hidden, float eps);
  // out (T, hidden) = this rank's partial out_proj sum. A chunk starting at position 0 (re)starts its
  // slot's state from zeros; any other chunk must continue where its slot's last chunk ended
  // (FailedPrecondition otherwise: a slot is never silently shared by two sequences).
  absl::Status Forward(StepContext& ctx, const float* x, float* out) override;

  // (Re)allocates the pool: `slots` empty slots.
  void AllocateStates(int32_t slots) override;
  // Slot `dst` takes `src`'s conv and recurrent state and position (a forked choice continues
  // where its parent's prompt ended).
  void CopyState(int32_t src, int32_t dst) override;
  int32_t num_slots() const { return static_cast<int32_t>(next_pos_.size()); }
  // float32 conv state (conv_dim, K-1) and recurrent state (n_v, dk, dv) of one slot.
  int64_t state_bytes_per_slot() const override {
    return static_cast<int64_t>(sizeof(float)) * (D_.conv_state_size() + D_.state_size());
  }

 private:
  DeltaNetWeights w_;
  std::vector<float> w_in_;    // (conv_dim + n_v dv + 2 n_v, H) in_qkv | in_z | in_b | in_a rows: one product
  DeltaNetLayout D_;
  int64_t hidden_ = 0;
  float eps_ = 1e-6f;
  // The pool: slot i's conv state at conv_[i * conv_state_size], recurrent state at S_[i * state_size];
  // next_pos_[i] the position its next token must have (-1: empty, only position 0 may start it).
  std::vector<float> conv_, S_;
  std::vector<int64_t> next_pos_;
};

}  // namespace tandem::engine::cpu
