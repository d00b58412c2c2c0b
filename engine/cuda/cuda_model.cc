#include "engine/cuda/cuda_model.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/device_array.h"
#include "engine/cuda/device_collectives.h"
#include "engine/cuda/gated_deltanet.h"
#include "engine/cuda/layers.h"
#include "engine/cuda/pinned_logit_pool.h"
#include "engine/cuda/random_fill.h"
#include "engine/load_checks.h"
#include "engine/memory_budget.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/carveout.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/moe_batched.h"
#include "kernels/matmul.h"
#include "kernels/moe_gemm.h"
#include "kernels/router_topk.h"

namespace tandem::engine::cuda {

namespace {

// The load options' default is the kernels' (kept in engine/model.h, which includes no kernel header).
static_assert(ModelLoadOptions{}.cuda_gemm_min_tokens == kernels::kGemmMinTokens);

// Steps of at most this many tokens fuse each RMSNorm into the product that follows it; larger ones
// (prefill chunks) keep add_rmsnorm + matmul_bf16, whose products switch to cuBLAS from 64 tokens.
constexpr int64_t kFuseNormMaxTokens = 32;

// How much of the next layer's first weights a one-token step's gate/up kernel asks the L2 for:
// about what DRAM moves while that kernel waits on the router's top-k. Session 43's A/Bs (H100, bf16
// batch 1 at 1k, against main without it): 3 MB -1.9%, 6 MB -3.0%, 10 MB -2.9%, 16 MB -1.4% a step
// (with the one-wave q/k/v product); the whole 21 MB q/k/v weight lost (+0.8%: it then competes
// with the experts' own loads), and so did marking the lines evict_last (docs/bench/decode-h200.md).
constexpr int64_t kNextLayerL2Bytes = int64_t{6} << 20;

// One decoder layer: h = x + mixer(input_norm(x)); out = h + ffn(post_norm(h)).
struct DecoderLayer {
  DeviceArray<bf16_bits> input_norm, post_norm;  // (hidden)
  std::unique_ptr<Mixer> mixer;
  std::unique_ptr<Ffn> ffn;
};

class CudaModel final : public Model {
 public:
  // A model on the current CUDA device, without weights yet, for options' rank and world (its comm,
  // not owned, is required when world > 1) with its cuda_* choices. Failing CUDA calls (no device,
  // out of memory for the stream) come back as a status.
  static absl::StatusOr<std::unique_ptr<CudaModel>> Create(ModelConfig cfg, const ModelLoadOptions& options) {
    int device = 0;
    RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
    cudaStream_t stream = nullptr;
    RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
    return std::unique_ptr<CudaModel>(new CudaModel(std::move(cfg), options, device, stream));
  }
  ~CudaModel() override {
    ClearGraphs();
    cudaStreamDestroy(stream_);
  }

 private:
  // Takes ownership of `stream`.
  CudaModel(ModelConfig cfg, const ModelLoadOptions& options, int device, cudaStream_t stream)
      : cfg_(std::move(cfg)), rank_(options.rank), world_(options.world),
        shard_(ComputeTpShard(cfg_, options.rank, options.world)), device_(device), stream_(stream),
        use_graphs_(options.cuda_graphs), gemm_min_tokens_(options.cuda_gemm_min_tokens),
        quant_prefill_split_(options.cuda_quant_prefill_split),
        paged_decode_attention_(options.cuda_decode_attention == "paged"),
        decode_attention_buffers_(options.cuda_decode_attention_buffers) {
    Comm* comm = options.comm;
    if (world_ > 1) {
      coll_ = MakeDeviceCollectives(comm, &owned_coll_);
      // Host-staged collectives synchronize the stream: such a step cannot be captured.
      if (!coll_->capturable()) use_graphs_ = false;
      // The comm's own device collectives (NCCL) or ones staged through host memory (owned here);
      // an agent's NCCL group is the former but not capturable (a rejoin replaces the communicator).
      TLOG(INFO) << "cuda model: rank " << rank_ << " of " << world_ << " on device " << device_ << ", "
                 << (owned_coll_ == nullptr ? "device" : "host-staged") << " collectives, graphs "
                 << (use_graphs_ ? "on" : "off") << " (comm " << comm->transport() << ")";
    }
    L_ = kernels::QkvLayout{shard_.n_heads, shard_.n_kv_heads, cfg_.head_dim, cfg_.RotaryDim()};
    if (cfg_.attention_output_gate) L_.gate_dim = L_.q_dim();  // as Attention lays out its qkv rows
    kv_spec_.num_layers = cfg_.num_hidden_layers;
    kv_spec_.num_kv_heads_local = L_.n_kv_heads;
    kv_spec_.head_dim = L_.head_dim;
    kv_spec_.bytes_per_element = sizeof(float);
  }

 public:
  absl::Status InitRope();
  // The weights from `src` (a checkpoint, or random ones), in the order of engine/model/layer_weights.h.
  absl::Status LoadWeights(const ModelWeightSpec& spec, WeightSource& src, RandomWeights* random);

  const ModelConfig& config() const override { return cfg_; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  KvCacheSpec kv_spec() const override { return kv_spec_; }
  int32_t kv_block_size() const override { return block_size_; }
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size, int32_t num_state_slots) override;
  absl::StatusOr<Logits> Forward(const StepBatch& batch) override;

  absl::Status FillKvRandom(uint64_t seed);
  absl::StatusOr<CudaStepStats> MeasureStepStats(const StepBatch& batch);
  void set_use_graphs(bool on) { use_graphs_ = on && (coll_ == nullptr || coll_->capturable()); }
  bool last_graph_replayed() const { return last_graph_replayed_; }
  cudaStream_t stream() const { return stream_; }
  void set_kv_dtype(KvDtype dtype) {
    kv_spec_.dtype = dtype;
    kv_spec_.bytes_per_element = KvDtypeBytes(dtype);
  }
  // The fp8 cache's per-layer scales (engine/kv_cache.h ReadKvScales), one per KV layer.
  void set_kv_scales(std::vector<kernels::KvScale> scales) { kv_scales_ = std::move(scales); }

 private:
  // The step's copies (StepBatch::block_copies / state_copies) on stream_, ahead of its kernels.
  absl::Status ApplyCopies(const StepBatch& batch);
  // The step's metadata in the pinned host buffer, its buffers grown, and the metadata on the device.
  absl::StatusOr<StepMeta> PrepareStep(const StepBatch& batch, bool pad_for_graph);
  absl::Status Reserve(const StepMeta& m);
  // The full-attention layers' shape for a step's block tables (this rank's heads).
  kernels::AttentionShape AttentionShapeOf(const StepMeta& m) const {
    return cuda::AttentionShapeOf(L_, block_size_, m.max_blocks);
  }
  // The scratch and cuBLAS handle the prefill products of a T-token step take, grown before the step
  // (out of memory: RESOURCE_EXHAUSTED) so that no launch allocates.
  absl::Status ReservePrefillScratch(int64_t T);
  // Every kernel of one step, on stream_ (captured into a graph for decode steps), with the TP
  // collectives enqueued on the same stream; ends with the logits in a_.logits on rank 0.
  absl::Status RunLayers(const StepMeta& m, int64_t max_positions, std::vector<int32_t>* ids_per_layer);
  // Runs a decode step from its graph, capturing it first when this shape has none yet.
  absl::Status RunGraph(const StepMeta& m);
  // TP all-reduce #1 / #2 (partial sums of o_proj and of the ffn down projection); none at TP=1.
  absl::Status AllReduce(float* dev, int64_t n) {
    return coll_ == nullptr ? absl::OkStatus() : coll_->AllReduceSum(dev, static_cast<size_t>(n), stream_);
  }
  // Waits for the step (and its collectives, with the comm's deadline).
  absl::Status Sync() {
    return coll_ != nullptr ? coll_->Wait(stream_) : CudaStatus(cudaStreamSynchronize(stream_), "step");
  }
  void ClearGraphs();
  const bf16_bits* LmHead() const { return lm_head_.get() != nullptr ? lm_head_.get() : embed_.get(); }

  ModelConfig cfg_;
  int rank_ = 0, world_ = 1;
  TpShard shard_;
  int device_ = 0;
  DeviceCollectives* coll_ = nullptr;  // null at TP=1
  std::unique_ptr<DeviceCollectives> owned_coll_;
  kernels::QkvLayout L_;
  KvCacheSpec kv_spec_;
  cudaStream_t stream_ = nullptr;
  bool use_graphs_ = true;
  // Tokens from which a step's products take the prefill paths (ModelLoadOptions::cuda_gemm_min_tokens).
  int64_t gemm_min_tokens_ = kernels::kGemmMinTokens;
  bool last_graph_replayed_ = false;

  DeviceArray<bf16_bits> embed_;       // (vocab, hidden)
  DeviceArray<bf16_bits> lm_head_;     // (vocab_per_rank, hidden); empty when tied at TP=1 (embed_ is used)
  DeviceArray<bf16_bits> final_norm_;  // (hidden)
  DeviceArray<float> inv_freq_;        // (rotary_dim / 2)
  std::vector<DecoderLayer> layers_;

  int32_t num_blocks_ = 0, block_size_ = 0;
  // The state pool's size, as CheckBatch takes it: kNoStateSlots for a model without per-sequence state.
  int32_t num_state_slots_ = kNoStateSlots;
  // (layers, num_blocks * block_size, n_kv_heads, head_dim) of kv_spec_.dtype: float32 (default:
  // the golden bound holds), bf16 (half the bytes) or fp8 (a quarter, with kv_scales_; empty: 1).
  std::vector<kernels::KvScale> kv_scales_;
  DeviceArray<uint8_t> k_cache_, v_cache_;

  Activations a_;
  // Prefill products of quantized weights dequantize one weight (or expert stack) at a time into
  // this: sized at load for the largest (empty for a bf16 model; engine/cuda/linear.h).
  DeviceArray<bf16_bits> dequant_;
  // ModelLoadOptions::cuda_quant_prefill_split: dequant_ holds a weight's bf16 hi and lo (linear.h
  // DequantScratch); LoadWeights sizes it by this.
  bool quant_prefill_split_ = false;
  bool paged_decode_attention_ = false;  // ModelLoadOptions::cuda_decode_attention == "paged"
  int decode_attention_buffers_ = kernels::kMaxDecodeBuffers;  // ModelLoadOptions::cuda_decode_attention_buffers
  int64_t cap_tokens_ = 0, cap_rows_ = 0;
  PinnedBuffer<int32_t> host_meta_;
  // The returned Logits' rows: the device copies into them directly (no second copy on the host).
  std::shared_ptr<PinnedLogitPool> logit_pool_ = std::make_shared<PinnedLogitPool>();
  // Decode graphs by shape: the kernels read everything that changes between steps
  // (tokens, positions, slots, tables) from a.meta, which the step rewrites before the replay.
  std::map<std::tuple<int64_t, int64_t, int64_t>, cudaGraphExec_t> graphs_;  // (T, R, max_blocks)
  std::set<std::tuple<int64_t, int64_t, int64_t>> eager_shapes_;  // TP: shapes run once uncaptured
};

absl::Status CudaModel::LoadWeights(const ModelWeightSpec& spec, WeightSource& src, RandomWeights* random) {
  const int64_t V = cfg_.vocab_size, H = cfg_.hidden_size;
  // Random embeddings have unit variance (fan-in 3 gives s = 1): the scale real ones have after a norm.
  RETURN_IF_ERROR(random != nullptr ? random->Fill(embed_, V * H, 3) : src.Read(spec.embed, embed_));
  const bool zc = cfg_.zero_centered_norms;  // (1 + w) norms: the kernels add the 1 (StepContext::norm_offset)
  RETURN_IF_ERROR(src.ReadNorm(spec.final_norm, final_norm_, zc));
  // lm_head split by vocabulary (the embedding's rows when tied); at TP=1 a tied head reads embed_
  // itself. The rows past the vocabulary on the last rank stay zero.
  if (!cfg_.tie_word_embeddings || world_ > 1) RETURN_IF_ERROR(src.Read(spec.lm_head, lm_head_));
  int64_t kv_layers = 0;
  kv_spec_.state_bytes_per_slot = 0;
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    const LayerWeightSpec& ls = spec.layers[l];
    DecoderLayer layer;
    RETURN_IF_ERROR(src.ReadNorm(ls.input_norm, layer.input_norm, zc));
    RETURN_IF_ERROR(src.ReadNorm(ls.post_norm, layer.post_norm, zc));
    // Mixer: the Gated DeltaNet (the hybrid models' linear_attention layers: state per sequence, no
    // KV) or full attention (a KV cache layer; the KV cache holds only these, counted in order).
    if (ls.linear) {
      ASSIGN_OR_RETURN(layer.mixer, GatedDeltaNet::Load(src, ls.linear_attention, cfg_, shard_));
    } else {
      ASSIGN_OR_RETURN(layer.mixer, Attention::Load(src, ls.attention, cfg_, shard_, kv_layers++));
    }
    kv_spec_.state_bytes_per_slot += layer.mixer->state_bytes_per_slot();
    // Ffn: routed experts (with the shared expert when the model has one) or a dense MLP.
    if (ls.moe) {
      ASSIGN_OR_RETURN(layer.ffn, MoeFfn::Load(src, ls.experts, cfg_, shard_));
    } else {
      ASSIGN_OR_RETURN(layer.ffn, DenseMlp::Load(src, ls.mlp, cfg_, shard_));
    }
    layers_.push_back(std::move(layer));
  }
  kv_spec_.num_layers = kv_layers;
  // The split prefill (ModelLoadOptions::cuda_quant_prefill_split) keeps hi and lo of a weight.
  if (src.largest_quantized_elems() > 0) {
    RETURN_IF_ERROR(dequant_.Allocate((quant_prefill_split_ ? 2 : 1) * src.largest_quantized_elems()));
  }
  return CudaStatus(cudaStreamSynchronize(stream_), "weights");
}

absl::Status CudaModel::InitRope() {
  const std::vector<float> inv = cpu::rope_inv_freq(cfg_.rope_theta, L_.rotary_dim);  // as the cpu backend
  RETURN_IF_ERROR(inv_freq_.Allocate(static_cast<int64_t>(inv.size())));
  return CudaStatus(cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice),
                    "upload inv_freq");
}

void CudaModel::ClearGraphs() {
  for (auto& [key, g] : graphs_) cudaGraphExecDestroy(g);
  graphs_.clear();
}

absl::Status CudaModel::AllocateKvCache(int32_t num_blocks, int32_t block_size, int32_t num_state_slots) {
  num_state_slots_ = kv_spec_.has_state() ? num_state_slots : kNoStateSlots;
  if (num_blocks <= 0 || block_size <= 0) {
    return absl::InvalidArgumentError("kv cache needs num_blocks > 0 and block_size > 0");
  }
  if (kv_spec_.has_state() && num_state_slots <= 0) {
    return absl::InvalidArgumentError("a model with per-sequence state needs num_state_slots > 0");
  }
  ClearGraphs();
  k_cache_.Free();
  v_cache_.Free();
  num_blocks_ = block_size_ = 0;
  const int64_t per_layer = static_cast<int64_t>(num_blocks) * block_size * L_.kv_dim() * kv_spec_.bytes_per_element;
  RETURN_IF_ERROR(k_cache_.Allocate(per_layer * kv_spec_.num_layers));  // full-attention layers only
  RETURN_IF_ERROR(v_cache_.Allocate(per_layer * kv_spec_.num_layers));
  // The state pools of the mixers that keep per-sequence state (each mixer owns its own).
  for (DecoderLayer& layer : layers_) RETURN_IF_ERROR(layer.mixer->AllocateStates(num_state_slots_));
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  return absl::OkStatus();
}

absl::Status CudaModel::FillKvRandom(uint64_t seed) {
  if (num_blocks_ == 0) return absl::FailedPreconditionError("FillKvRandom before AllocateKvCache");
  if (kv_spec_.dtype == KvDtype::kFp8) {  // e4m3 codes of values in [-1, 1] (random bytes hold NaNs)
    fill_random_e4m3(k_cache_.get(), k_cache_.size(), -1.0f, 1.0f, seed, stream_);
    fill_random_e4m3(v_cache_.get(), v_cache_.size(), -1.0f, 1.0f, seed + 1, stream_);
    return CudaStatus(cudaStreamSynchronize(stream_), "fill kv");
  }
  // Random bits as bf16 pairs: for a float32 cache each float is two random bf16 (finite values).
  fill_random_bf16(reinterpret_cast<bf16_bits*>(k_cache_.get()), k_cache_.size() / 2, 1.0f, seed, stream_);
  fill_random_bf16(reinterpret_cast<bf16_bits*>(v_cache_.get()), v_cache_.size() / 2, 1.0f, seed + 1, stream_);
  return CudaStatus(cudaStreamSynchronize(stream_), "fill kv");
}

absl::StatusOr<StepMeta> CudaModel::PrepareStep(const StepBatch& batch, bool pad_for_graph) {
  const StepMeta m = PlanStepMeta(batch, pad_for_graph);
  if (host_meta_.capacity() < m.total()) {
    RETURN_IF_ERROR(host_meta_.Reserve(std::max<int64_t>(m.total(), 2 * host_meta_.capacity())));
  }
  WriteStepMeta(batch, m, block_size_, host_meta_.get());
  RETURN_IF_ERROR(Reserve(m));
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(a_.meta.get(), host_meta_.get(), m.total() * sizeof(int32_t),
                                             cudaMemcpyHostToDevice, stream_),
                             "step metadata"));
  return m;
}

absl::Status CudaModel::Reserve(const StepMeta& m) {
  // A shared expert runs as one more expert (MoeFfn): room for E + 1 logits and K + 1 experts.
  const int64_t shared = shard_.shared_inter > 0 ? 1 : 0;
  const int64_t H = cfg_.hidden_size, T = m.T, K = std::max<int64_t>(cfg_.num_experts_per_tok, 1) + shared;
  const int64_t E = std::max<int64_t>(cfg_.num_experts, 1) + shared;
  const int64_t act = std::max(T * K * shard_.moe_inter, 3 * T * shard_.inter);
  const kernels::AttentionShape attn = AttentionShapeOf(m);
  // The split decode kernel's partials take more room than paged_attention's (a partition per kv head
  // carries the whole group): the larger of the two; the counters (one per kv head) fit paged's.
  const int64_t scratch = std::max(kernels::attention_scratch_floats(T, attn, m.max_blocks * block_size_),
                                   kernels::attention_decode_scratch_floats(T, attn, m.max_blocks * block_size_));
  bool grew = false;
  // Whatever happens below, captured graphs hold the old addresses of anything that grew.
  absl::Status st = [&]() -> absl::Status {
    if (T > cap_tokens_) {
      for (DeviceArray<float>* a : {&a_.x, &a_.x2, &a_.xn, &a_.delta}) RETURN_IF_ERROR(a->Reserve(T * H, &grew));
      RETURN_IF_ERROR(a_.xn_split.Reserve(H, &grew));
      RETURN_IF_ERROR(a_.qkv.Reserve(T * L_.row(), &grew));
      RETURN_IF_ERROR(a_.att.Reserve(T * L_.q_dim(), &grew));
      RETURN_IF_ERROR(a_.router_logits.Reserve(T * E, &grew));
      RETURN_IF_ERROR(a_.expert_ids.Reserve(T * K, &grew));
      RETURN_IF_ERROR(a_.expert_w.Reserve(T * K, &grew));
      RETURN_IF_ERROR(a_.act.Reserve(act, &grew));
      if (cfg_.num_experts > 0) {  // room for every decode batch up to this step's size
        const int64_t Tb = std::min(T, kernels::kMoeBatchedMaxTokens);
        const size_t bytes = kernels::MoeBatchedScratchBytes(Tb, K, H, shard_.moe_inter);
        RETURN_IF_ERROR(a_.moe_batch.Reserve(static_cast<int64_t>((bytes + 3) / 4), &grew));
      }
      RETURN_IF_ERROR(a_.linear.Reserve(GatedDeltaNet::ScratchFloats(GatedDeltaNet::Layout(cfg_, shard_), T), &grew));
      cap_tokens_ = T;
    }
    if (m.R > cap_rows_) {
      RETURN_IF_ERROR(a_.hn.Reserve(m.R * H, &grew));
      RETURN_IF_ERROR(a_.logits.Reserve(m.R * cfg_.vocab_size, &grew));
      if (world_ > 1) {
        const int64_t Vr = shard_.vocab_per_rank;
        RETURN_IF_ERROR(a_.logits_local.Reserve(m.R * Vr, &grew));
        RETURN_IF_ERROR(a_.logits_all.Reserve(world_ * m.R * Vr, &grew));
      }
      cap_rows_ = m.R;
    }
    RETURN_IF_ERROR(a_.meta.Reserve(m.total(), &grew));
    RETURN_IF_ERROR(ReservePrefillScratch(T));
    RETURN_IF_ERROR(a_.attn_scratch.Reserve(scratch, &grew));
    const int64_t counters = kernels::attention_counter_count(T, attn);
    bool new_counters = false;
    RETURN_IF_ERROR(a_.attn_counters.Reserve(counters, &new_counters));
    if (new_counters) {  // on stream_: ordered before the step's kernels
      grew = true;
      RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(a_.attn_counters.get(), 0, counters * sizeof(uint32_t), stream_),
                                 "attention counters"));
    }
    return absl::OkStatus();
  }();
  if (grew) ClearGraphs();
  return st;
}

absl::Status CudaModel::ReservePrefillScratch(int64_t T) {
  // Graphs capture no prefill product (kernels/gemm.h UseGemmPath), so this growth leaves them valid.
  if (T < gemm_min_tokens_) return absl::OkStatus();
  // matmul_bf16's inputs: hidden (qkv and the attention gate, router, dense gate_up, lm_head), q_dim
  // (o_proj), the dense MLP's intermediate slice (down).
  // The Gated DeltaNet's out_proj reads its value heads (value_dim).
  const int64_t max_in = std::max({cfg_.hidden_size, L_.q_dim(), shard_.inter,
                                   GatedDeltaNet::Layout(cfg_, shard_).value_dim()});
  // The router's product keeps its float32 input as bf16 hi + lo (kernels/gemm.h gemm_bf16_split);
  // with the split quantized prefill every product of a quantized weight does.
  const int64_t split_in = quant_prefill_split_ ? max_in : cfg_.num_experts > 0 ? cfg_.hidden_size : 0;
  RETURN_IF_ERROR(CudaStatus(kernels::ReserveGemm(stream_, T, max_in, split_in), "prefill GEMM scratch"));
  if (cfg_.num_experts == 0) return absl::OkStatus();
  // (K + 1 experts per token with a shared expert, which runs as one more.)
  return CudaStatus(kernels::ReserveMoeGrouped(stream_, T, cfg_.num_experts_per_tok + (shard_.shared_inter > 0 ? 1 : 0),
                                               cfg_.hidden_size, shard_.moe_inter),
                    "prefill MoE GEMM scratch");
}

absl::Status CudaModel::RunLayers(const StepMeta& m, int64_t max_positions, std::vector<int32_t>* ids_per_layer) {
  const int64_t T = m.T, H = cfg_.hidden_size, V = cfg_.vocab_size;
  StepContext ctx;
  ctx.m = m;
  ctx.meta = a_.meta.get();
  ctx.stream = stream_;
  ctx.a = &a_;
  ctx.hidden = H;
  ctx.eps = static_cast<float>(cfg_.rms_norm_eps);
  ctx.norm_offset = cfg_.zero_centered_norms ? 1.0f : 0.0f;
  // Decode-sized steps fold each norm into the product after it (kernels/norm_matmul.h);
  // prefill-sized steps keep the separate norm so the products can take the GEMM path.
  ctx.fuse = T <= kFuseNormMaxTokens;
  ctx.x = a_.x.get();
  ctx.x_next = a_.x2.get();
  ctx.max_positions = max_positions;
  ctx.block_size = block_size_;
  ctx.kv_slots = static_cast<int64_t>(num_blocks_) * block_size_;
  ctx.kv_dtype = kv_spec_.dtype;
  ctx.kv_scales = kv_spec_.dtype == KvDtype::kFp8 && !kv_scales_.empty() ? kv_scales_.data() : nullptr;
  ctx.k_cache = k_cache_.get();
  ctx.v_cache = v_cache_.get();
  ctx.inv_freq = inv_freq_.get();
  ctx.ids_per_layer = ids_per_layer;
  ctx.dequant = DequantScratch{dequant_.get(), dequant_.size(), quant_prefill_split_};
  ctx.gemm_min_tokens = gemm_min_tokens_;
  ctx.paged_decode_attention = paged_decode_attention_;
  ctx.decode_attention_buffers = decode_attention_buffers_;

  // A step of one token whose attention is attention_decode's (68 KB blocks of shared memory) asks
  // every kernel for one split: the smallest shared memory that holds one attention block an SM,
  // the rest L1 (kernels/carveout.h kFitDecodeAttention), so that the SMs do not switch their L1 /
  // shared split around attention twice a layer (moving the switch elsewhere cost 3-5% at batch 1,
  // session 22). Asking for the largest shared memory instead cost the weight-streaming kernels
  // about what the split attention saves (session 32, H100: 3.616 ms a bf16 step at 4k against
  // 3.450). Other steps keep the driver's split: with every kernel at the largest shared memory
  // batch 8 was 15% slower (its per-token products read the batch's inputs through L1).
  // The split fits the block the step's attention launches: with the deep walk (a long context)
  // that block holds more K/V buffers.
  const kernels::AttentionShape attn = AttentionShapeOf(m);
  const bool fit_attention = T == 1 && DecodeTakesSplitAttention(ctx, attn);
  const int fit_buffers = fit_attention ? kernels::attention_decode_buffers(T, attn, max_positions,
                                                                            ctx.kv_dtype == KvDtype::kBf16,
                                                                            decode_attention_buffers_)
                                        : 2;
  const kernels::ScopedLaunchCarveout carveout(
      fit_attention ? kernels::LaunchCarveout::kFitDecodeAttention : kernels::LaunchCarveout::kDefault, fit_buffers);
  kernels::embedding(a_.x.get(), ctx.meta + m.tokens(), embed_.get(), T, H, stream_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    DecoderLayer& layer = layers_[l];
    RETURN_IF_ERROR(layer.mixer->Forward(ctx, l == 0 ? nullptr : a_.delta.get(), layer.input_norm.get()));
    RETURN_IF_ERROR(AllReduce(a_.delta.get(), T * H));  // all-reduce #1: o_proj partial sums
    // One-token steps: the experts' gate/up kernel asks the L2 for the start of the next layer's
    // first weights while it waits on the router (kernels/l2_prefetch.h).
    ctx.next_weights = T == 1 && l + 1 < layers_.size() ? layers_[l + 1].mixer->FirstWeights() : kernels::L2Prefetch{};
    ctx.next_weights.bytes = std::min(ctx.next_weights.bytes, kNextLayerL2Bytes);
    RETURN_IF_ERROR(layer.ffn->Forward(ctx, a_.delta.get(), layer.post_norm.get()));
    RETURN_IF_ERROR(AllReduce(a_.delta.get(), T * H));  // all-reduce #2: expert / MLP partial sums
  }
  // Final norm (adding the last ffn output), then lm_head over the wanted rows only.
  ctx.Norm(a_.delta.get(), final_norm_.get());
  kernels::gather_rows(a_.hn.get(), a_.xn.get(), ctx.meta + m.rows(), m.R, H, stream_);
  if (world_ == 1) {
    kernels::matmul_bf16(a_.logits.get(), a_.hn.get(), LmHead(), m.R, H, V, stream_, gemm_min_tokens_);
    return absl::OkStatus();
  }
  // TP: this rank's vocabulary slice, gathered on rank 0 as (world, R, Vr), then laid out as
  // (R, vocab) there: rank w's columns [w Vr, w Vr + n_w) of every row (the padding rows dropped).
  const int64_t Vr = shard_.vocab_per_rank, R = m.R;
  if (R == 0) return absl::OkStatus();
  kernels::matmul_bf16(a_.logits_local.get(), a_.hn.get(), lm_head_.get(), R, H, Vr, stream_, gemm_min_tokens_);
  RETURN_IF_ERROR(coll_->GatherTo(a_.logits_local.get(), R * Vr, a_.logits_all.get(), 0, stream_));
  if (rank_ != 0) return absl::OkStatus();
  for (int64_t w = 0; w < world_; ++w) {
    const int64_t n = std::max<int64_t>(0, std::min(V, (w + 1) * Vr) - w * Vr);
    if (n == 0) continue;
    RETURN_IF_ERROR(CudaStatus(cudaMemcpy2DAsync(a_.logits.get() + w * Vr, V * sizeof(float),
                                                 a_.logits_all.get() + w * R * Vr, Vr * sizeof(float),
                                                 n * sizeof(float), R, cudaMemcpyDeviceToDevice, stream_),
                               "logits layout"));
  }
  return absl::OkStatus();
}

absl::Status CudaModel::RunGraph(const StepMeta& m) {
  // Partitions for the whole table width: the graph stays valid as positions grow within it.
  const auto key = std::make_tuple(m.T, m.R, m.max_blocks);
  auto it = graphs_.find(key);
  // TP (NCCL): the first step of a shape runs eagerly, so that NCCL sets up its connections and
  // buffers for these sizes outside a capture; the shape's second step is captured.
  if (it == graphs_.end() && coll_ != nullptr && eager_shapes_.insert(key).second) {
    return RunLayers(m, m.max_blocks * block_size_, nullptr);
  }
  if (it == graphs_.end()) {
    RETURN_IF_ERROR(CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "graph capture"));
    cudaGraph_t g = nullptr;
    absl::Status st = RunLayers(m, m.max_blocks * block_size_, nullptr);
    // End the capture whatever happened (the stream is unusable while capturing).
    const cudaError_t end = cudaStreamEndCapture(stream_, &g);
    if (st.ok()) st = CudaStatus(end, "graph capture");
    cudaGraphExec_t exec = nullptr;
    if (st.ok()) st = CudaStatus(cudaGraphInstantiate(&exec, g, 0), "graph instantiate");
    if (g != nullptr) cudaGraphDestroy(g);
    if (!st.ok()) {
      cudaGetLastError();  // drop the partial graph's error state
      return st;
    }
    it = graphs_.emplace(key, exec).first;
  }
  RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(it->second, stream_), "graph launch"));
  last_graph_replayed_ = true;
  return absl::OkStatus();
}

absl::Status CudaModel::ApplyCopies(const StepBatch& batch) {
  // The cache is (layers, num_blocks * block_size, kv_dim) of the KV type: a block is contiguous
  // within a layer, copied as bytes for every element type. One copy per layer, K and V: a pitched
  // copy of all layers at once would take a layer's bytes as its pitch, which may pass the
  // device's maximum pitch (2^31 bytes) on a large pool.
  const size_t block_bytes = static_cast<size_t>(block_size_) * L_.kv_dim() * kv_spec_.bytes_per_element;
  const size_t layer_bytes = block_bytes * num_blocks_;
  for (const CopyOp& c : batch.block_copies) {
    for (int64_t l = 0; l < kv_spec_.num_layers; ++l) {
      for (uint8_t* pool : {k_cache_.get(), v_cache_.get()}) {
        uint8_t* layer = pool + l * layer_bytes;
        RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(layer + c.dst * block_bytes, layer + c.src * block_bytes,
                                                   block_bytes, cudaMemcpyDeviceToDevice, stream_),
                                   "copy KV block"));
      }
    }
  }
  for (const CopyOp& c : batch.state_copies) {
    for (DecoderLayer& layer : layers_) RETURN_IF_ERROR(layer.mixer->CopyState(c.src, c.dst, stream_));
  }
  return absl::OkStatus();
}

absl::StatusOr<Logits> CudaModel::Forward(const StepBatch& batch) {
  RETURN_IF_ERROR(CheckBatch(batch, num_blocks_, block_size_, cfg_.vocab_size, num_state_slots_));
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));  // the caller's thread may differ
  RETURN_IF_ERROR(ApplyCopies(batch));
  if (batch.seqs.empty()) return Logits{};
  bool decode = true;
  for (const auto& s : batch.seqs) decode &= s.tokens.size() == 1;
  const bool graph = use_graphs_ && decode;
  ASSIGN_OR_RETURN(const StepMeta m, PrepareStep(batch, graph));
  last_graph_replayed_ = false;
  if (graph) {
    RETURN_IF_ERROR(RunGraph(m));
  } else {
    int64_t max_positions = 1;
    for (const auto& s : batch.seqs) {
      max_positions = std::max<int64_t>(max_positions, s.start_pos + static_cast<int64_t>(s.tokens.size()));
    }
    RETURN_IF_ERROR(RunLayers(m, max_positions, nullptr));
  }
  Logits out;
  if (m.R == 0 || rank_ != 0) {
    RETURN_IF_ERROR(Sync());
    return out;
  }
  const int64_t V = cfg_.vocab_size;
  RETURN_IF_ERROR(logit_pool_->Reserve(m.R * V * sizeof(float)));
  out.vocab = V;
  out.data = LogitVector(LogitAllocator<float>(logit_pool_));
  out.data.resize(m.R * V);  // takes the buffer Reserve made sure of; left unset (logit_storage.h)
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(out.data.data(), a_.logits.get(), m.R * V * sizeof(float),
                                             cudaMemcpyDeviceToHost, stream_),
                             "logits"));
  RETURN_IF_ERROR(Sync());
  for (int64_t r = 0; r < m.R; ++r) {
    const int32_t t = host_meta_.get()[m.rows() + r];
    out.seq_ids.push_back(batch.seqs[host_meta_.get()[m.token_seq() + t]].seq_id);
    out.positions.push_back(host_meta_.get()[m.pos() + t]);
  }
  return out;
}

absl::StatusOr<CudaStepStats> CudaModel::MeasureStepStats(const StepBatch& batch) {
  RETURN_IF_ERROR(CheckBatch(batch, num_blocks_, block_size_, cfg_.vocab_size, num_state_slots_));
  if (batch.seqs.empty()) return CudaStepStats{};
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  ASSIGN_OR_RETURN(const StepMeta m, PrepareStep(batch, false));
  std::vector<int32_t> distinct;
  RETURN_IF_ERROR(RunLayers(m, m.max_blocks * block_size_, &distinct));
  RETURN_IF_ERROR(Sync());
  CudaStepStats st;
  double sum = 0;
  for (int32_t d : distinct) sum += d;
  st.distinct_experts_per_layer = distinct.empty() ? 0 : sum / static_cast<double>(distinct.size());
  return st;
}

absl::Status CheckDevice() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    return absl::FailedPreconditionError(std::string("backend cuda: no usable CUDA device (") +
                                         (err != cudaSuccess ? cudaGetErrorString(err) : "none found") + ")");
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaModel*> AsCuda(Model& model) {
  auto* m = dynamic_cast<CudaModel*>(&model);
  if (m == nullptr) return absl::InvalidArgumentError("not a cuda model");
  return m;
}

// A model of `config` on the current device, without weights yet.
absl::StatusOr<std::unique_ptr<CudaModel>> NewCudaModel(const ModelConfig& config, const ModelLoadOptions& options) {
  RETURN_IF_ERROR(CheckSupported(config, options.world));
  RETURN_IF_ERROR(CheckComm(options));
  if (options.cuda_gemm_min_tokens < 1) {
    return absl::InvalidArgumentError("cuda_gemm_min_tokens must be at least 1 (got " +
                                      std::to_string(options.cuda_gemm_min_tokens) + ")");
  }
  if (options.cuda_decode_attention != "split" && options.cuda_decode_attention != "paged") {
    return absl::InvalidArgumentError("cuda_decode_attention must be split or paged (got '" +
                                      options.cuda_decode_attention + "')");
  }
  if (options.cuda_decode_attention_buffers < 2 ||
      options.cuda_decode_attention_buffers > kernels::kMaxDecodeBuffers) {
    return absl::InvalidArgumentError("cuda_decode_attention_buffers must be 2 to " +
                                      std::to_string(kernels::kMaxDecodeBuffers) + " (got " +
                                      std::to_string(options.cuda_decode_attention_buffers) + ")");
  }
  RETURN_IF_ERROR(CheckDevice());
  // float32 by default: the golden bound holds (kv_cache_dtype picks bf16 or fp8).
  ASSIGN_OR_RETURN(const KvDtype kv_dtype, ParseKvDtype(options.kv_cache_dtype, KvDtype::kF32));
  ASSIGN_OR_RETURN(auto model, CudaModel::Create(config, options));
  model->set_kv_dtype(kv_dtype);
  RETURN_IF_ERROR(model->InitRope());
  return model;
}

}  // namespace

absl::Status CheckSupported(const ModelConfig& config, int world) {
  // The hybrid models' layers are all here: the Gated DeltaNet (gated_deltanet.h), gated attention
  // and the shared expert (layers.h).
  // Block-scaled FP8 and NVFP4 linears stay quantized on the device (engine/cuda/linear.h).
  RETURN_IF_ERROR(CheckModelSupported(config, world, "cuda", /*hybrid=*/true, /*fp8=*/true, /*nvfp4=*/true));
  if (config.head_dim % 32 != 0 || config.head_dim > 256) {
    return absl::UnimplementedError("cuda backend: head_dim must be 32, 64, 128 or 256");
  }
  // The matmul kernels read 8 bf16 (16 bytes) at a time along `in`: each rank's slice too.
  if (config.hidden_size % 8 != 0 || (config.moe_intermediate_size / world) % 8 != 0 ||
      (config.intermediate_size / world) % 8 != 0) {
    return absl::UnimplementedError("cuda backend: hidden and (per-rank) intermediate sizes must be multiples of 8");
  }
  // The shared expert runs as one more expert of the MoE kernels (engine/cuda/layers.h MoeFfn).
  if (config.shared_expert_intermediate_size > 0 &&
      config.shared_expert_intermediate_size != config.moe_intermediate_size) {
    return absl::UnimplementedError(
        "cuda backend: shared_expert_intermediate_size (" + std::to_string(config.shared_expert_intermediate_size) +
        ") must equal moe_intermediate_size (" + std::to_string(config.moe_intermediate_size) +
        "): the shared expert runs as one more expert (Qwen3-Next and Qwen3.5 have both 512)");
  }
  if (config.num_experts > kernels::kRouterMaxExperts) {
    return absl::UnimplementedError("cuda backend: at most " + std::to_string(kernels::kRouterMaxExperts) +
                                    " experts (num_experts=" + std::to_string(config.num_experts) + ")");
  }
  if (config.attention_bias) return absl::UnimplementedError("cuda backend: attention_bias is not supported");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> LoadCudaModel(const std::string& dir, const ModelConfig& config,
                                                     const ModelLoadOptions& options) {
  ASSIGN_OR_RETURN(auto model, NewCudaModel(config, options));
  ASSIGN_OR_RETURN(auto ckpt, Checkpoint::Open(dir, options.progress));
  ASSIGN_OR_RETURN(const WeightNames names, ResolveWeightNames(*ckpt, config));
  CheckpointWeights src(*ckpt);
  const TpShard shard = ComputeTpShard(config, options.rank, options.world);
  RETURN_IF_ERROR(model->LoadWeights(DescribeWeights(names, config, shard), src, nullptr));
  ASSIGN_OR_RETURN(std::vector<kernels::KvScale> kv_scales, ReadKvScales(*ckpt, names, config));
  model->set_kv_scales(std::move(kv_scales));
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<std::unique_ptr<Model>> CreateSyntheticCudaModel(const ModelConfig& config, uint64_t seed,
                                                                const ModelLoadOptions& tp,
                                                                kernels::WeightFormat weights) {
  ASSIGN_OR_RETURN(auto model, NewCudaModel(config, tp));
  RandomWeights src(seed, model->stream(), weights);
  const TpShard shard = ComputeTpShard(config, tp.rank, tp.world);
  const WeightNames names{kTextPrefix, config.tie_word_embeddings};  // the spec's shapes only
  RETURN_IF_ERROR(model->LoadWeights(DescribeWeights(names, config, shard), src, &src));
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<std::unique_ptr<Model>> CreateSyntheticCudaModel(const ModelConfig& config, uint64_t seed,
                                                                kernels::WeightFormat weights) {
  return CreateSyntheticCudaModel(config, seed, ModelLoadOptions{}, weights);
}

absl::StatusOr<int32_t> KvBlocksFromDeviceMemory(const Model& model, double memory_fraction, int32_t block_size) {
  if (!(memory_fraction > 0.0 && memory_fraction <= 1.0)) {
    return absl::InvalidArgumentError("memory_fraction must be in (0, 1]");
  }
  size_t free_b = 0, total_b = 0;
  RETURN_IF_ERROR(CudaStatus(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
  int device = 0, integrated = 0;
  RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  RETURN_IF_ERROR(CudaStatus(cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, device), "cudaDeviceGetAttribute"));
  DeviceMemoryReading reading;
  reading.device_total = static_cast<int64_t>(total_b);
  reading.device_free = static_cast<int64_t>(free_b);
  reading.unified = integrated != 0;
  if (reading.unified) {
    // The GPU allocates from the host's RAM: count from MemAvailable (engine/memory_budget.h).
    const HostMemory host = ReadHostMemory();
    reading.host_total = host.total;
    reading.host_available = host.available;
    TLOG(INFO) << "KV sizing: unified memory (integrated GPU): MemTotal " << (host.total >> 20) << " MiB, MemAvailable "
               << (host.available >> 20) << " MiB; cudaMemGetInfo free " << (free_b >> 20) << " MiB";
  }
  const double budget = DeviceKvBudgetBytes(memory_fraction, reading);
  const double per_block = static_cast<double>(model.kv_spec().bytes_per_token()) * block_size;
  if (budget < per_block) {
    return absl::ResourceExhaustedError("no room for the KV pool: " + std::to_string(memory_fraction) +
                                        " of the " + (reading.unified ? "machine's" : "device's") +
                                        " memory is already used (" +
                                        std::to_string(static_cast<int64_t>(-budget) >> 20) + " MiB over it)");
  }
  return static_cast<int32_t>(std::min(budget / per_block, 2e9));
}

absl::Status FillKvRandom(Model& model, uint64_t seed) {
  ASSIGN_OR_RETURN(CudaModel * m, AsCuda(model));
  return m->FillKvRandom(seed);
}

absl::StatusOr<CudaStepStats> MeasureStepStats(Model& model, const StepBatch& batch) {
  ASSIGN_OR_RETURN(CudaModel * m, AsCuda(model));
  return m->MeasureStepStats(batch);
}

absl::Status SetKvDtype(Model& model, const std::string& dtype) {
  ASSIGN_OR_RETURN(CudaModel * m, AsCuda(model));
  ASSIGN_OR_RETURN(const KvDtype d, ParseKvDtype(dtype, KvDtype::kF32));
  if (m->kv_block_size() > 0) return absl::FailedPreconditionError("SetKvDtype after AllocateKvCache");
  m->set_kv_dtype(d);
  return absl::OkStatus();
}

void SetUseGraphs(Model& model, bool on) {
  if (auto* m = dynamic_cast<CudaModel*>(&model)) m->set_use_graphs(on);
}

bool LastForwardReplayedGraph(const Model& model) {
  const auto* m = dynamic_cast<const CudaModel*>(&model);
  return m != nullptr && m->last_graph_replayed();
}

}  // namespace tandem::engine::cuda
