// The Gated DeltaNet mixer of the hybrid models (Qwen3-Next, Qwen3.5-MoE) on the device, this
// rank's heads: the same part and weights as engine/cpu/gated_deltanet.h, over the kernels of
// kernels/gated_deltanet.h. Each sequence's conv and recurrent state lives in a slot of this
// layer's pools (SeqChunk::state_slot); everything per step is read from the step's metadata on
// the device, so a decode step is graph-capturable.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cuda/device_array.h"
#include "engine/cuda/layers.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/tp_shard.h"
#include "kernels/gated_deltanet.h"

namespace tandem::engine::cuda {

class GatedDeltaNet final : public Mixer {
 public:
  // This rank's heads of a checkpoint's layer (engine/model/layer_weights.h describes both the
  // Qwen3.5 and the fused Qwen3-Next layouts in the same order). Unsupported head shapes are refused.
  static absl::StatusOr<std::unique_ptr<GatedDeltaNet>> Load(WeightSource& src, const LinearAttentionWeightSpec& spec,
                                                             const ModelConfig& cfg, const TpShard& shard);
  // x += delta, xn = rmsnorm(x) into the fused input projection (qkv | z | b | a), the conv and
  // gates, the delta rule over the slots' states, the gated norm, then out_proj's partial sum
  // into ctx.a->delta. Scratch: ctx.a->linear (ScratchFloats(T), grown by the model before the step).
  absl::Status Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) override;
  kernels::L2Prefetch FirstWeights() const override { return w_in_.l2_range(); }

  // float32 conv state (conv_dim, K-1) and recurrent state (n_v, dk, dv) of one slot.
  int64_t state_bytes_per_slot() const override;
  // Both pools for `slots` sequences, zeroed (contents of a previous pool are dropped).
  absl::Status AllocateStates(int32_t slots) override;
  // Slot `dst` takes `src`'s conv and recurrent state (device-to-device on `stream`).
  absl::Status CopyState(int32_t src, int32_t dst, cudaStream_t stream) override;

  // This rank's heads (all zero for a model without linear-attention heads).
  static kernels::DeltaNetLayout Layout(const ModelConfig& cfg, const TpShard& shard);
  // The floats of Activations::linear a step of T tokens needs (0 without linear-attention heads).
  static int64_t ScratchFloats(const kernels::DeltaNetLayout& L, int64_t T);

 private:
  // The in_proj as two products (split_in_) into the fused layout at `proj`, using the step's
  // scratch in [free_begin, free_end) for their outputs.
  absl::Status SplitInProj(StepContext& ctx, float* proj, float* free_begin, float* free_end, const float* delta,
                           const bf16_bits* norm_w);

  kernels::DeltaNetLayout L_;
  int64_t hidden_ = 0;
  float eps_ = 1e-6f;
  // (proj_row, hidden) in_qkv | in_z | in_b | in_a rows: one product. When b|a are in another
  // format than qkv|z (Qwen's FP8 releases keep them bf16), w_in_ holds qkv|z and w_ba_ b|a: two
  // products, whose rows are then copied into the fused layout (split_in_).
  LinearWeight w_in_;
  LinearWeight w_ba_;
  bool split_in_ = false;
  DeviceArray<bf16_bits> conv_;     // (conv_dim, K)
  DeviceArray<bf16_bits> a_log_;    // (n_v)
  DeviceArray<bf16_bits> dt_bias_;  // (n_v)
  DeviceArray<bf16_bits> norm_;     // (dv) the gated output norm (plain w)
  LinearWeight out_;                // (hidden, value_dim) out_proj's columns of this rank's value heads
  DeviceArray<float> conv_states_;  // (slots, conv_dim, K-1)
  DeviceArray<float> states_;       // (slots, n_v, dk, dv)
};

}  // namespace tandem::engine::cuda
