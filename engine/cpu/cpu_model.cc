#include "engine/cpu/cpu_model.h"

#include <algorithm>
#include <thread>

#include "common/log.h"
#include "common/status.h"
#include "engine/cpu/gated_deltanet.h"
#include "engine/cpu/layers.h"
#include "engine/cpu/ops.h"
#include "engine/load_checks.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"

namespace tandem::engine::cpu {

namespace {

// One decoder layer: h = x + mixer(input_norm(x)); out = h + ffn(post_norm(h)).
struct DecoderLayer {
  std::vector<float> input_norm;  // (hidden)
  std::vector<float> post_norm;   // (hidden)
  std::unique_ptr<Mixer> mixer;
  std::unique_ptr<Ffn> ffn;
};

class CpuModel final : public Model {
 public:
  CpuModel(ModelConfig cfg, int rank, int world, Comm* comm, int threads, KvDtype kv_dtype)
      : cfg_(std::move(cfg)), shard_(ComputeTpShard(cfg_, rank, world)), comm_(comm), pool_(threads) {
    kv_spec_.dtype = kv_dtype;
  }

  absl::Status LoadWeights(const Checkpoint& ckpt);

  const ModelConfig& config() const override { return cfg_; }
  int rank() const override { return shard_.rank; }
  int world() const override { return shard_.world; }
  KvCacheSpec kv_spec() const override { return kv_spec_; }
  int32_t kv_block_size() const override { return kv_.block_size(); }
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size, int32_t num_state_slots) override;
  absl::StatusOr<Logits> Forward(const StepBatch& batch) override;

 private:
  // The step's copies (StepBatch::block_copies / state_copies), before anything reads the cache.
  void ApplyCopies(const StepBatch& batch);
  absl::Status AllReduce(std::vector<float>& x);
  absl::StatusOr<Logits> ComputeLogits(const StepBatch& batch, const StepContext& ctx, std::vector<float>& x,
                                       const std::vector<float>& delta);

  ModelConfig cfg_;
  TpShard shard_;
  Comm* comm_;
  ThreadPool pool_;
  KvCacheSpec kv_spec_;
  PagedKvCache kv_;
  std::vector<float> inv_freq_;    // (rotary_dim / 2)
  std::vector<float> embed_;       // (vocab, hidden) replicated
  std::vector<DecoderLayer> layers_;
  // The state pool's size, as CheckBatch takes it: kNoStateSlots for a model without per-sequence state.
  int32_t num_state_slots_ = kNoStateSlots;
  std::vector<float> final_norm_;  // (hidden)
  std::vector<float> lm_head_;     // (vocab_per_rank, hidden) rows [rank * vocab_per_rank, ...), zero-padded
};

absl::Status CpuModel::LoadWeights(const Checkpoint& ckpt) {
  ASSIGN_OR_RETURN(const WeightNames names, ResolveWeightNames(ckpt, cfg_));
  const ModelWeightSpec spec = DescribeWeights(names, cfg_, shard_);
  ASSIGN_OR_RETURN(embed_, ReadWeight(ckpt, spec.embed));
  const bool zc = cfg_.zero_centered_norms;  // the hybrid models' (1 + w) norms, loaded as 1 + w
  ASSIGN_OR_RETURN(final_norm_, ReadNorm(ckpt, spec.final_norm, zc));
  // lm_head split by vocabulary; tied embeddings read the embedding matrix instead.
  ASSIGN_OR_RETURN(lm_head_, ReadWeight(ckpt, spec.lm_head));
  inv_freq_ = rope_inv_freq(cfg_.rope_theta, cfg_.RotaryDim());
  // The fp8 cache's per-layer scales (1 unless the checkpoint has them), one per KV layer.
  ASSIGN_OR_RETURN(const std::vector<kernels::KvScale> kv_scales, ReadKvScales(ckpt, names, cfg_));

  int64_t kv_layers = 0;
  for (const LayerWeightSpec& ls : spec.layers) {
    DecoderLayer layer;
    ASSIGN_OR_RETURN(layer.input_norm, ReadNorm(ckpt, ls.input_norm, zc));
    ASSIGN_OR_RETURN(layer.post_norm, ReadNorm(ckpt, ls.post_norm, zc));
    // Mixer: Gated DeltaNet (hybrid models' linear_attention layers, state per sequence, no KV)
    // or full attention (a KV cache layer).
    if (ls.linear) {
      ASSIGN_OR_RETURN(layer.mixer, GatedDeltaNet::Load(ckpt, ls.linear_attention, cfg_, shard_));
    } else {
      if (kv_layers >= static_cast<int64_t>(kv_scales.size())) {
        return absl::InternalError("more attention layers than the config's full-attention layers");
      }
      const kernels::KvScale scale = kv_scales[kv_layers];
      ASSIGN_OR_RETURN(layer.mixer, Attention::Load(ckpt, ls.attention, cfg_, shard_, kv_layers++, scale));
    }
    kv_spec_.state_bytes_per_slot += layer.mixer->state_bytes_per_slot();
    // Ffn: routed experts (with the shared expert when the model has one) or a dense MLP.
    if (ls.moe) {
      ASSIGN_OR_RETURN(layer.ffn, MoeFfn::Load(ckpt, ls.experts, cfg_, shard_));
    } else {
      ASSIGN_OR_RETURN(layer.ffn, DenseMlp::Load(ckpt, ls.mlp, cfg_, shard_));
    }
    layers_.push_back(std::move(layer));
  }
  kv_spec_.num_layers = kv_layers;
  kv_spec_.num_kv_heads_local = shard_.n_kv_heads;
  kv_spec_.head_dim = cfg_.head_dim;
  kv_spec_.bytes_per_element = KvDtypeBytes(kv_spec_.dtype);
  return absl::OkStatus();
}

absl::Status CpuModel::AllocateKvCache(int32_t num_blocks, int32_t block_size, int32_t num_state_slots) {
  if (num_blocks <= 0 || block_size <= 0) {
    return absl::InvalidArgumentError("kv cache needs num_blocks > 0 and block_size > 0");
  }
  if (kv_spec_.has_state() && num_state_slots <= 0) {
    return absl::InvalidArgumentError("a model with per-sequence state needs num_state_slots > 0");
  }
  kv_ = PagedKvCache(kv_spec_.num_layers, num_blocks, block_size, kv_spec_.num_kv_heads_local, kv_spec_.head_dim,
                     kv_spec_.dtype);
  num_state_slots_ = kv_spec_.has_state() ? num_state_slots : kNoStateSlots;
  // The state pools of the mixers that keep per-sequence state (each mixer owns its own).
  for (DecoderLayer& layer : layers_) layer.mixer->AllocateStates(num_state_slots_);
  return absl::OkStatus();
}

void CpuModel::ApplyCopies(const StepBatch& batch) {
  // A block of one layer's K (or V) is block_size tokens of (n_kv_heads, head_dim) elements of
  // the cache's type: copied as bytes, so every element type is alike.
  const int64_t block_bytes = static_cast<int64_t>(kv_.block_size()) * kv_spec_.num_kv_heads_local *
                              kv_spec_.head_dim * kv_spec_.bytes_per_element;
  for (const CopyOp& c : batch.block_copies) {
    for (int64_t l = 0; l < kv_spec_.num_layers; ++l) {
      for (char* pool : {kv_.keys<char>(l), kv_.values<char>(l)}) {
        std::copy(pool + c.src * block_bytes, pool + (c.src + 1) * block_bytes, pool + c.dst * block_bytes);
      }
    }
  }
  for (const CopyOp& c : batch.state_copies) {
    for (DecoderLayer& layer : layers_) layer.mixer->CopyState(c.src, c.dst);
  }
}

absl::Status CpuModel::AllReduce(std::vector<float>& x) {
  if (shard_.world == 1) return absl::OkStatus();
  return comm_->AllReduceSum(x.data(), x.size());
}

absl::StatusOr<Logits> CpuModel::Forward(const StepBatch& batch) {
  RETURN_IF_ERROR(CheckBatch(batch, kv_.num_blocks(), kv_.block_size(), cfg_.vocab_size, num_state_slots_));
  ApplyCopies(batch);
  StepContext ctx;
  ctx.m = PlanStepMeta(batch, /*pad_tables=*/false);
  std::vector<int32_t> meta(ctx.m.total());
  WriteStepMeta(batch, ctx.m, kv_.block_size(), meta.data());
  ctx.meta = meta.data();
  ctx.block_size = kv_.block_size();
  ctx.pool = &pool_;
  ctx.kv = &kv_;
  ctx.inv_freq = inv_freq_.data();
  ctx.batch = &batch;
  const int64_t T = ctx.num_tokens(), H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  // Embedding (replicated): x (T, hidden). Each sublayer adds its input's delta to x first, as
  // the cuda backend's fused norms do.
  std::vector<float> x(T * H), xn(T * H), delta(T * H);
  embedding(x.data(), ctx.meta + ctx.m.tokens(), embed_.data(), T, H);
  for (size_t l = 0; l < layers_.size(); ++l) {
    DecoderLayer& layer = layers_[l];
    add_rmsnorm(xn.data(), x.data(), l == 0 ? nullptr : delta.data(), layer.input_norm.data(), T, H, eps);
    RETURN_IF_ERROR(layer.mixer->Forward(ctx, xn.data(), delta.data()));
    RETURN_IF_ERROR(AllReduce(delta));  // all-reduce #1: o_proj partial sums
    add_rmsnorm(xn.data(), x.data(), delta.data(), layer.post_norm.data(), T, H, eps);
    RETURN_IF_ERROR(layer.ffn->Forward(ctx, xn.data(), delta.data()));
    RETURN_IF_ERROR(AllReduce(delta));  // all-reduce #2: expert / MLP partial sums
  }
  return ComputeLogits(batch, ctx, x, delta);
}

absl::StatusOr<Logits> CpuModel::ComputeLogits(const StepBatch& batch, const StepContext& ctx, std::vector<float>& x,
                                               const std::vector<float>& delta) {
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size, Vr = shard_.vocab_per_rank, W = shard_.world;
  const StepMeta& m = ctx.m;
  Logits out;
  if (m.R == 0) return out;
  // Final norm (adding the last ffn output) of the rows whose logits are wanted.
  const int64_t R = m.R;
  for (int64_t i = 0; i < m.T * H; ++i) x[i] += delta[i];
  std::vector<float> h(R * H);  // (R, hidden)
  for (int64_t r = 0; r < R; ++r) {
    rmsnorm(h.data() + r * H, x.data() + ctx.meta[m.rows() + r] * H, final_norm_.data(), 1, H,
            static_cast<float>(cfg_.rms_norm_eps));
  }
  std::vector<float> local(R * Vr);  // (R, vocab_per_rank) this rank's slice of the vocabulary
  matmul(&pool_, local.data(), h.data(), lm_head_.data(), R, H, Vr);

  std::vector<float> gathered;  // (world, R, vocab_per_rank) on rank 0
  const float* all = local.data();
  if (W > 1) {
    if (shard_.rank == 0) gathered.resize(W * R * Vr);
    RETURN_IF_ERROR(comm_->Gather(local.data(), local.size(), gathered.data(), 0));
    all = gathered.data();
  }
  if (shard_.rank != 0) return out;
  out.vocab = V;
  out.data.resize(R * V);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t w = 0; w < W; ++w) {
      const int64_t v0 = w * Vr, n = std::max<int64_t>(0, std::min(V, v0 + Vr) - v0);
      std::copy(all + (w * R + r) * Vr, all + (w * R + r) * Vr + n, out.data.begin() + r * V + v0);
    }
    const int32_t t = ctx.meta[m.rows() + r];
    out.seq_ids.push_back(batch.seqs[ctx.meta[m.token_seq() + t]].seq_id);
    out.positions.push_back(ctx.meta[m.pos() + t]);
  }
  return out;
}

}  // namespace

absl::Status CheckSupported(const ModelConfig& config, int world) {
  // The cpu backend has the hybrid models' layers (Gated DeltaNet, gated attention, shared expert)
  // and dequantizes block-scaled FP8 and NVFP4 weights to float32 at load (ReadWeightSlice).
  return CheckModelSupported(config, world, "cpu", /*hybrid=*/true, /*fp8=*/true, /*nvfp4=*/true);
}

absl::StatusOr<std::unique_ptr<Model>> LoadCpuModel(const std::string& dir, const ModelConfig& config,
                                                    const ModelLoadOptions& options) {
  RETURN_IF_ERROR(CheckSupported(config, options.world));
  RETURN_IF_ERROR(CheckComm(options));
  int threads = options.threads;
  if (threads <= 0) {
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / options.world);
  }
  // The cpu backend's own default is float32 (exact: the golden logits' bound needs it).
  ASSIGN_OR_RETURN(const KvDtype kv_dtype, ParseKvDtype(options.kv_cache_dtype, KvDtype::kF32));
  ASSIGN_OR_RETURN(auto ckpt, Checkpoint::Open(dir, options.progress));
  auto model = std::make_unique<CpuModel>(config, options.rank, options.world, options.comm, threads, kv_dtype);
  RETURN_IF_ERROR(model->LoadWeights(*ckpt));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace tandem::engine::cpu
