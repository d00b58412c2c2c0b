// The parts of the cuda forward pass: the same parts with the same weights as engine/cpu/layers.h
// (what each reads: engine/model/layer_weights.h), in bf16 on the device, launching kernels/ on
// the model's stream. A decoder layer is a mixer (full attention, gated in the hybrid models, or
// their Gated DeltaNet, engine/cuda/gated_deltanet.h) and an ffn (routed experts, with a shared
// expert in the hybrid models, or a dense SwiGLU MLP). Unlike the cpu parts, each takes the
// residual stream rather than its normed input: its first product folds the norm in for
// decode-sized steps (kernels/norm_matmul.h), so the norm belongs to the part. Each writes this
// rank's partial output to ctx.a->delta, which the model all-reduces (two per layer).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cuda/device_array.h"
#include "engine/cuda/linear.h"
#include "engine/kv_cache.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config.h"
#include "engine/step.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"
#include "kernels/matmul.h"
#include "kernels/qk_norm_rope.h"

namespace tandem::engine::cuda {

using kernels::bf16_bits;

// Where the parts' weights come from: the cuda backend's one reader of a WeightSpec (a new weight
// format is uploaded here), or random values for benchmarks.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // dst = the spec's packed weight as bf16 on the device (allocated here).
  virtual absl::Status Read(const WeightSpec& spec, DeviceArray<bf16_bits>& dst) = 0;
  // The format ReadLinear gives a linear's spec ([rows, cols], or [count, rows, cols] for experts):
  // a checkpoint's tensors decide; RandomWeights quantizes the linears a real checkpoint does
  // (`random_quantized`: false for the Gated DeltaNet's b|a rows, bf16 in Qwen's FP8 releases).
  virtual absl::StatusOr<kernels::WeightFormat> LinearFormat(const WeightSpec& spec, bool random_quantized) = 0;
  // dst = a linear (a product's weight, never a norm or an embedding) as LinearFormat says: kept
  // quantized on the device, or bf16 as Read. Each part reads every linear a checkpoint may
  // quantize through this.
  absl::Status ReadLinear(const WeightSpec& spec, LinearWeight& dst, bool random_quantized = true);
  // The largest quantized weight read so far, in values: the model's dequantization scratch.
  int64_t largest_quantized_elems() const { return largest_quantized_; }
  // A norm's weight w as stored: the kernels add StepContext::norm_offset (1 for zero-centred
  // norms) in float32, so a stored w near 0 keeps its bf16 precision (bf16(1 + w) would round
  // it to 2^-8). Only the random source cares (its neutral weight is 0 for a zero-centred norm).
  virtual absl::Status ReadNorm(const WeightSpec& spec, DeviceArray<bf16_bits>& dst, bool zero_centered) {
    (void)zero_centered;
    return Read(spec, dst);
  }

 protected:
  // dst = the quantized linear of `format` (LinearFormat's answer, not kBf16).
  virtual absl::Status ReadQuantized(const WeightSpec& spec, kernels::WeightFormat format, LinearWeight& dst) = 0;

 private:
  int64_t largest_quantized_ = 0;
};

// bf16 tensors uploaded as stored; other float types (f32 / f16 norms in some checkpoints)
// converted through the float32 reader.
class CheckpointWeights final : public WeightSource {
 public:
  explicit CheckpointWeights(const Checkpoint& ckpt) : ckpt_(ckpt) {}
  absl::Status Read(const WeightSpec& spec, DeviceArray<bf16_bits>& dst) override;
  absl::StatusOr<kernels::WeightFormat> LinearFormat(const WeightSpec& spec, bool random_quantized) override;

 protected:
  // The slices' quantized bytes and re-indexed scales (engine/model/quant_pack.h), uploaded as they are.
  absl::Status ReadQuantized(const WeightSpec& spec, kernels::WeightFormat format, LinearWeight& dst) override;

 private:
  absl::Status Upload(const WeightSlice& s, bf16_bits* dst);
  const Checkpoint& ckpt_;
};

// Norms and other 1-D weights (A_log, dt_bias) 1, zero-centred norms 0 (a weight of 1 either
// way); matrices uniform in [-s, s] with s = sqrt(3 / fan_in), fan_in the full
// stored input size: unit-variance outputs for unit-variance inputs. Each matrix takes the next
// seed, so the same seed and order on every rank give every rank the same replicated weights
// (embedding, router), and every rank routes to the same experts as a real TP group does.
// With `linears` kFp8Block or kNvfp4 the quantizable linears are drawn in that format with the
// same value scale (random_fill.h): FP8 in 128 x 128 blocks, NVFP4 with random group scales.
class RandomWeights final : public WeightSource {
 public:
  RandomWeights(uint64_t seed, cudaStream_t stream, kernels::WeightFormat linears = kernels::WeightFormat::kBf16)
      : seed_(seed), stream_(stream), linears_(linears) {}
  absl::Status Read(const WeightSpec& spec, DeviceArray<bf16_bits>& dst) override;
  absl::Status ReadNorm(const WeightSpec& spec, DeviceArray<bf16_bits>& dst, bool zero_centered) override;
  absl::StatusOr<kernels::WeightFormat> LinearFormat(const WeightSpec& spec, bool random_quantized) override;
  // n uniform values for a given fan-in (the embedding's own scale).
  absl::Status Fill(DeviceArray<bf16_bits>& dst, int64_t n, int64_t fan_in);

 protected:
  absl::Status ReadQuantized(const WeightSpec& spec, kernels::WeightFormat format, LinearWeight& dst) override;

 private:
  uint64_t seed_;
  cudaStream_t stream_;
  kernels::WeightFormat linears_;
};

// Activations for up to a number of tokens / logits rows, shared by the parts (grown by the model).
struct Activations {
  DeviceArray<float> x, xn, delta;  // (T, hidden) residual stream, normed input, sublayer output
  DeviceArray<float> xn_split;      // (hidden) a one-token step's router input in split order (NVFP4 experts)
  DeviceArray<float> x2;            // (T, hidden) the residual's other half of the ping-pong (fused norms)
  DeviceArray<float> qkv;           // (T, q_dim + 2 kv_dim (+ q_dim: gated attention's gate))
  DeviceArray<float> att;           // (T, q_dim)
  DeviceArray<float> router_logits; // (T, E)
  DeviceArray<int32_t> expert_ids;  // (T, K)
  DeviceArray<float> expert_w;      // (T, K)
  DeviceArray<float> act;           // (T*K, I) or dense (T, 2I) + (T, I)
  DeviceArray<float> moe_batch;     // kernels/moe_batched.h's scratch (decode batches of bf16 experts)
  DeviceArray<float> linear;        // the Gated DeltaNet's scratch (GatedDeltaNet::ScratchFloats)
  DeviceArray<float> attn_scratch;
  DeviceArray<uint32_t> attn_counters;  // (T, n_heads) partitions done per attention (0 between launches)
  DeviceArray<float> hn;            // (R, hidden) final-normed rows whose logits are wanted
  DeviceArray<float> logits;        // (R, vocab)
  DeviceArray<float> logits_local;  // TP: (R, vocab_per_rank) this rank's lm_head rows
  DeviceArray<float> logits_all;    // TP: (world, R, vocab_per_rank) gathered (rank 0 reads it)
  DeviceArray<int32_t> meta;        // the step's metadata (engine/step.h StepMeta)
};

// One step as the parts see it. Every kernel goes on `stream` (captured into a graph for decode).
struct StepContext {
  StepMeta m;
  const int32_t* meta = nullptr;  // on the device, m.total() values
  cudaStream_t stream = nullptr;
  Activations* a = nullptr;
  int64_t hidden = 0;
  float eps = 1e-6f;
  float norm_offset = 0.0f;  // 1 with zero-centred norms ((1 + w), the hybrid models): added in the kernels
  // Decode-sized steps fold each norm into the product after it: the residual then alternates
  // between x and x_next, since every block of that product still reads the old one.
  bool fuse = false;
  float* x = nullptr;       // the residual stream now
  float* x_next = nullptr;  // where a fused norm writes the next one
  // Attention: partitions up to max_positions; the KV pool (layers, slots, kv_dim) of f32, bf16 or
  // fp8 (e4m3 holding K / k scale and V / v scale, kv_scales one per KV layer; null: scales of 1).
  int64_t max_positions = 0;
  int32_t block_size = 0;
  int64_t kv_slots = 0;
  KvDtype kv_dtype = KvDtype::kF32;
  const kernels::KvScale* kv_scales = nullptr;
  uint8_t* k_cache = nullptr;
  uint8_t* v_cache = nullptr;
  const float* inv_freq = nullptr;  // (rotary_dim / 2)
  DequantScratch dequant;           // prefill products of quantized weights dequantize into it (linear.h)
  std::vector<int32_t>* ids_per_layer = nullptr;  // MeasureStepStats: distinct experts per MoE layer
  // Tokens from which the products, the MoE experts and attention take their prefill paths (the
  // model's ModelLoadOptions::cuda_gemm_min_tokens), passed to every launcher that switches on it.
  int64_t gemm_min_tokens = kernels::kGemmMinTokens;
  // ModelLoadOptions::cuda_decode_attention == "paged": decode steps keep paged_attention.
  bool paged_decode_attention = false;
  // ModelLoadOptions::cuda_decode_attention_buffers: the most K/V buffers a split decode attention
  // block may take (kernels/attention_decode.h attention_decode_buffers).
  int decode_attention_buffers = kernels::kMaxDecodeBuffers;
  // One-token steps: the next layer's first weights (Mixer::FirstWeights), which the experts'
  // gate/up kernel asks the L2 for while it waits on the router's top-k (kernels/l2_prefetch.h).
  kernels::L2Prefetch next_weights;

  // Whether a step of T tokens takes the prefill paths (kernels/gemm.h UseGemmPath): T reaches
  // gemm_min_tokens and the stream is not being captured.
  bool GemmPath(int64_t T) const { return kernels::UseGemmPath(T, gemm_min_tokens, stream); }
  // Whether this is a decode step: one token per sequence (token s is sequence s), off the prefill
  // paths.
  bool Decode() const { return !GemmPath(m.T) && m.T == m.S; }

  // The sublayer's input: x += delta (when not null), xn = rmsnorm(x) * norm_w, y (T, out) = xn w^T;
  // xn is kept in a->xn when keep_xn (always when not fused).
  // float_input keeps xn's float32 precision for the product on prefill-sized steps too
  // (kernels/matmul.h matmul_bf16_float_input): the router, whose top-k must not flip on bf16
  // rounding of its input. xn_split (one-token steps; null: none): where the fused kernel also
  // stores xn in split order (kernels/split_order.h). Returns whether it did (only the fused path
  // does); the caller reads xn_split only then.
  bool NormMatmul(float* y, const float* delta, const bf16_bits* norm_w, const bf16_bits* w, int64_t out, bool keep_xn,
                  bool float_input = false, float* xn_split = nullptr);
  // The same for a linear (LinearWeight::rows outputs): a bf16 one as above; a quantized one has
  // no fused product (kernels/norm_matmul.h reads bf16), so the norm runs first with the same
  // residual semantics (x_next under fuse) and then its product (LinearMatmul).
  absl::Status NormMatmul(float* y, const float* delta, const bf16_bits* norm_w, const LinearWeight& w, bool keep_xn);
  // y = x W^T on this step's stream (LinearMatmul with the model's dequantization scratch).
  absl::Status Matmul(float* y, const float* x_in, const LinearWeight& w) const;
  // x += delta (when not null); a->xn = rmsnorm(x) * norm_w.
  void Norm(const float* delta, const bf16_bits* norm_w);
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  // Adds `delta` (the previous sublayer's output; null for the first layer) to the residual, norms
  // it with `norm_w`, and writes this rank's partial output to ctx.a->delta.
  virtual absl::Status Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) = 0;
  // The weights of its first product (read first when the layer starts): what the layer before
  // asks the L2 for while its experts' gate/up kernel waits on the router (StepContext::next_weights).
  virtual kernels::L2Prefetch FirstWeights() const { return {}; }
  // Per-sequence state (the Gated DeltaNet's conv and recurrent state): this rank's bytes of one
  // slot (0: the mixer keeps none), and the pool of `slots` slots (re)allocated on the device.
  virtual int64_t state_bytes_per_slot() const { return 0; }
  virtual absl::Status AllocateStates(int32_t slots) {
    (void)slots;
    return absl::OkStatus();
  }
  // Slot `dst` becomes a copy of slot `src` (StepBatch::state_copies; both inside the pool),
  // enqueued on `stream` before the step's kernels.
  virtual absl::Status CopyState(int32_t src, int32_t dst, cudaStream_t stream) {
    (void)src, (void)dst, (void)stream;
    return absl::OkStatus();
  }
};

class Ffn {
 public:
  virtual ~Ffn() = default;
  // As Mixer::Forward.
  virtual absl::Status Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) = 0;
};

// The attention kernels' shape of the full-attention layout L (this rank's heads) over a step's block
// tables of max_blocks columns.
inline kernels::AttentionShape AttentionShapeOf(const kernels::QkvLayout& L, int64_t block_size, int64_t max_blocks) {
  return {L.n_heads, L.n_kv_heads, L.head_dim, block_size, max_blocks, L.row()};
}

// Whether the step's full attention (shape A) takes attention_decode: a decode step (one token per
// sequence, off the prefill path) over positions up to ctx.max_positions (the captured graph's table
// width); the rule and its A/Bs are in layers.cc. Attention::Attend launches by it, and CudaModel
// asks it too: such a step of one token runs every kernel with the shared memory that fits one
// attention_decode block an SM (kernels/carveout.h kFitDecodeAttention).
bool DecodeTakesSplitAttention(const StepContext& ctx, const kernels::AttentionShape& A);

// Grouped-query self-attention over the paged KV cache, this rank's heads only. Gated (the hybrid
// models' attention_output_gate): each head's output times sigmoid of its gate rows before o_proj;
// the gate rows follow q, k and v in the one fused product (QkvLayout::gate_dim).
class Attention final : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Attention>> Load(WeightSource& src, const AttentionWeightSpec& spec,
                                                         const ModelConfig& cfg, const TpShard& shard,
                                                         int64_t kv_layer);
  absl::Status Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) override;
  kernels::L2Prefetch FirstWeights() const override { return wqkv_.l2_range(); }

 private:
  // The KV cache's element type decides the kernels' overloads; the rest is the same.
  template <typename KV>
  void Attend(StepContext& ctx, KV* k_cache, KV* v_cache);

  kernels::QkvLayout L_;  // this rank's q and kv heads
  int64_t kv_layer_ = 0;
  LinearWeight wqkv_;                      // (L_.row(), hidden) q_proj, k_proj, v_proj (, gate) rows
  LinearWeight wo_;                        // (hidden, q_dim) the columns of this rank's heads
  DeviceArray<bf16_bits> q_norm_, k_norm_; // (head_dim)
};

// SwiGLU MLP, this rank's slice of the intermediate dimension. Its norm stays a separate kernel.
class DenseMlp final : public Ffn {
 public:
  static absl::StatusOr<std::unique_ptr<DenseMlp>> Load(WeightSource& src, const MlpWeightSpec& spec,
                                                        const ModelConfig& cfg, const TpShard& shard);
  absl::Status Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) override;

 private:
  int64_t inter_ = 0;
  LinearWeight gate_up_;  // (2 inter, hidden) gate_proj rows, then up_proj rows
  LinearWeight down_;     // (hidden, inter)
};

// Routed experts: the router product (with the norm folded in for decode), top-k on the device,
// then the experts' gate_up and down with the expert ids read on the device (kernels/moe.h). The
// hybrid models' shared expert (sharded like the experts) adds sigmoid(x . shared_expert_gate)
// times its SwiGLU output to the same partial sum: it runs as one more, always chosen, expert.
class MoeFfn final : public Ffn {
 public:
  static absl::StatusOr<std::unique_ptr<MoeFfn>> Load(WeightSource& src, const MoeWeightSpec& spec,
                                                      const ModelConfig& cfg, const TpShard& shard);
  absl::Status Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) override;

 private:
  int64_t num_experts_ = 0, top_k_ = 0, inter_ = 0;  // inter: this rank's slice
  bool norm_topk_prob_ = true;
  DeviceArray<bf16_bits> router_;   // (num_experts, hidden) replicated
  // Quantized experts run the quantized expert kernels on decode-sized steps (kernels/quant_moe.h
  // below MoeBatchedMinTokens tokens, moe_batched_quant from it where it takes the layout) and the
  // bf16 ones over the stack dequantized into the scratch on prefill-sized steps.
  LinearWeight gate_up_;  // (num_experts, 2 inter, hidden)
  LinearWeight down_;     // (num_experts, hidden, inter)
  // The shared expert (when the model has one) is expert num_experts_ of router_ (its gate row),
  // gate_up_ and down_: always chosen, weighted by sigmoid of its gate logit (MoeFfn::Load).
  bool shared_as_expert_ = false;
};

}  // namespace tandem::engine::cuda
