#include "engine/cpu/cpu_model.h"

#include <algorithm>
#include <thread>

#include "common/log.h"
#include "common/status.h"
#include "engine/cpu/layers.h"
#include "engine/cpu/ops.h"
#include "engine/model/checkpoint.h"
#include "engine/model/weight_names.h"

namespace tandem::engine::cpu {

namespace {

// One decoder layer: h = x + mixer(norm_in(x)); out = h + ffn(norm_post(h)).
struct DecoderLayer {
  std::vector<float> input_norm;  // (hidden)
  std::vector<float> post_norm;   // (hidden)
  std::unique_ptr<Mixer> mixer;
  std::unique_ptr<Ffn> ffn;
};

class CpuModel final : public Model {
 public:
  CpuModel(ModelConfig cfg, Shard shard, Comm* comm, int threads)
      : cfg_(std::move(cfg)), shard_(shard), comm_(comm), pool_(threads) {}

  absl::Status LoadWeights(const Checkpoint& ckpt);

  const ModelConfig& config() const override { return cfg_; }
  int rank() const override { return shard_.rank; }
  int world() const override { return shard_.world; }
  KvCacheSpec kv_spec() const override { return kv_spec_; }
  int32_t kv_block_size() const override { return kv_.block_size(); }
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size) override;
  absl::StatusOr<Logits> Forward(const StepBatch& batch) override;

 private:
  absl::Status CheckBatch(const StepBatch& batch) const;
  absl::Status AllReduce(std::vector<float>& x);
  absl::StatusOr<Logits> ComputeLogits(const StepBatch& batch, const StepContext& ctx, const std::vector<float>& x);

  ModelConfig cfg_;
  Shard shard_;
  Comm* comm_;
  ThreadPool pool_;
  KvCacheSpec kv_spec_;
  PagedKvCache kv_;
  std::vector<float> embed_;       // (vocab, hidden) replicated
  std::vector<DecoderLayer> layers_;
  std::vector<float> final_norm_;  // (hidden)
  int64_t vocab_per_rank_ = 0;     // ceil(vocab / world): the last rank's slice is zero-padded
  std::vector<float> lm_head_;     // (vocab_per_rank, hidden) rows [rank * vocab_per_rank, ...)
};

absl::Status CpuModel::LoadWeights(const Checkpoint& ckpt) {
  ASSIGN_OR_RETURN(const WeightNames names, ResolveWeightNames(ckpt, cfg_));
  const int64_t V = cfg_.vocab_size, H = cfg_.hidden_size;
  ASSIGN_OR_RETURN(Tensor embed, ckpt.Read(names.Embed(), {V, H}));
  embed_ = std::move(embed.data);
  ASSIGN_OR_RETURN(Tensor norm, ckpt.Read(names.FinalNorm(), {H}));
  final_norm_ = std::move(norm.data);

  int64_t kv_layers = 0;
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    const std::string lp = names.Layer(l, "");
    DecoderLayer layer;
    ASSIGN_OR_RETURN(Tensor in_norm, ckpt.Read(lp + "input_layernorm.weight", {H}));
    ASSIGN_OR_RETURN(Tensor post_norm, ckpt.Read(lp + "post_attention_layernorm.weight", {H}));
    layer.input_norm = std::move(in_norm.data);
    layer.post_norm = std::move(post_norm.data);
    // Mixer: full attention (the hybrid models' linear attention slots in here by layer_types).
    ASSIGN_OR_RETURN(auto attn, Attention::Load(ckpt, cfg_, lp + "self_attn.", shard_, kv_layers++));
    kv_spec_.num_kv_heads_local = attn->n_kv_heads_local();
    layer.mixer = std::move(attn);
    // Ffn: routed experts or a dense MLP (a shared expert would be added inside the MoE).
    if (cfg_.IsMoeLayer(l)) {
      ASSIGN_OR_RETURN(layer.ffn, MoeFfn::Load(ckpt, cfg_, lp + "mlp.", shard_));
    } else {
      ASSIGN_OR_RETURN(layer.ffn, DenseMlp::Load(ckpt, cfg_, lp + "mlp.", shard_));
    }
    layers_.push_back(std::move(layer));
  }
  kv_spec_.num_layers = kv_layers;
  kv_spec_.head_dim = cfg_.head_dim;
  kv_spec_.bytes_per_element = sizeof(float);

  // lm_head split by vocabulary; tied embeddings read the embedding matrix instead.
  vocab_per_rank_ = (V + shard_.world - 1) / shard_.world;
  const int64_t start = shard_.rank * vocab_per_rank_;
  const int64_t len = std::max<int64_t>(0, std::min(V, start + vocab_per_rank_) - start);
  lm_head_.assign(vocab_per_rank_ * H, 0.0f);
  const std::string head_name = names.LmHead();
  if (len > 0) {
    ASSIGN_OR_RETURN(Tensor head, ckpt.ReadSlice(head_name, {V, H}, 0, start, len));
    std::copy(head.data.begin(), head.data.end(), lm_head_.begin());
  }
  return absl::OkStatus();
}

absl::Status CpuModel::AllocateKvCache(int32_t num_blocks, int32_t block_size) {
  if (num_blocks <= 0 || block_size <= 0) {
    return absl::InvalidArgumentError("kv cache needs num_blocks > 0 and block_size > 0");
  }
  kv_ = PagedKvCache(kv_spec_.num_layers, num_blocks, block_size, kv_spec_.num_kv_heads_local, kv_spec_.head_dim);
  return absl::OkStatus();
}

absl::Status CpuModel::CheckBatch(const StepBatch& batch) const {
  if (!kv_.allocated()) return absl::FailedPreconditionError("Forward before AllocateKvCache");
  for (const auto& s : batch.seqs) {
    const std::string who = "step: sequence " + std::to_string(s.seq_id) + ": ";
    if (s.tokens.empty()) return absl::InvalidArgumentError(who + "empty chunk");
    if (s.start_pos < 0) return absl::InvalidArgumentError(who + "negative start_pos");
    const int64_t end = s.start_pos + static_cast<int64_t>(s.tokens.size());
    if (static_cast<int64_t>(s.block_table.size()) * kv_.block_size() < end) {
      return absl::InvalidArgumentError(who + "block table of " + std::to_string(s.block_table.size()) +
                                        " blocks does not cover " + std::to_string(end) + " positions");
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= kv_.num_blocks()) {
        return absl::InvalidArgumentError(who + "block id " + std::to_string(b) + " outside the pool of " +
                                          std::to_string(kv_.num_blocks()));
      }
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= cfg_.vocab_size) {
        return absl::InvalidArgumentError(who + "token id " + std::to_string(t) + " outside the vocabulary of " +
                                          std::to_string(cfg_.vocab_size));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuModel::AllReduce(std::vector<float>& x) {
  if (shard_.world == 1) return absl::OkStatus();
  return comm_->AllReduceSum(x.data(), x.size());
}

absl::StatusOr<Logits> CpuModel::Forward(const StepBatch& batch) {
  RETURN_IF_ERROR(CheckBatch(batch));
  StepContext ctx;
  ctx.batch = &batch;
  ctx.pool = &pool_;
  ctx.kv = &kv_;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    for (size_t i = 0; i < batch.seqs[s].tokens.size(); ++i) {
      ctx.token_seq.push_back(static_cast<int32_t>(s));
      ctx.token_pos.push_back(batch.seqs[s].start_pos + static_cast<int32_t>(i));
    }
  }
  const int64_t T = ctx.num_tokens(), H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  // Embedding (replicated): x (T, hidden).
  std::vector<float> x(T * H), xn(T * H), part(T * H);
  int64_t t = 0;
  for (const auto& s : batch.seqs) {
    for (int32_t tok : s.tokens) {
      std::copy(embed_.begin() + tok * H, embed_.begin() + (tok + 1) * H, x.begin() + t * H);
      ++t;
    }
  }

  for (auto& layer : layers_) {
    rmsnorm(xn.data(), x.data(), layer.input_norm.data(), T, H, eps);
    RETURN_IF_ERROR(layer.mixer->Forward(ctx, xn.data(), part.data()));
    RETURN_IF_ERROR(AllReduce(part));  // all-reduce #1: o_proj partial sums
    for (int64_t i = 0; i < T * H; ++i) x[i] += part[i];
    rmsnorm(xn.data(), x.data(), layer.post_norm.data(), T, H, eps);
    RETURN_IF_ERROR(layer.ffn->Forward(ctx, xn.data(), part.data()));
    RETURN_IF_ERROR(AllReduce(part));  // all-reduce #2: expert / MLP partial sums
    for (int64_t i = 0; i < T * H; ++i) x[i] += part[i];
  }
  return ComputeLogits(batch, ctx, x);
}

absl::StatusOr<Logits> CpuModel::ComputeLogits(const StepBatch& batch, const StepContext& ctx,
                                               const std::vector<float>& x) {
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size, Vr = vocab_per_rank_, W = shard_.world;
  // The tokens whose logits are wanted: the last of a chunk, or all of it.
  std::vector<int64_t> rows;
  int64_t t = 0;
  for (const auto& s : batch.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    for (int64_t i = 0; i < n; ++i, ++t) {
      if (s.want_all_logits || (s.want_logits && i == n - 1)) rows.push_back(t);
    }
  }
  Logits out;
  if (rows.empty()) return out;
  const int64_t R = static_cast<int64_t>(rows.size());
  std::vector<float> h(R * H);  // (R, hidden) final-normed rows
  for (int64_t r = 0; r < R; ++r) {
    rmsnorm(h.data() + r * H, x.data() + rows[r] * H, final_norm_.data(), 1, H,
            static_cast<float>(cfg_.rms_norm_eps));
  }
  std::vector<float> local(R * Vr);  // (R, vocab_per_rank) this rank's slice of the vocabulary
  matmul(pool_, local.data(), h.data(), lm_head_.data(), R, H, Vr);

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
    out.seq_ids.push_back(batch.seqs[ctx.token_seq[rows[r]]].seq_id);
    out.positions.push_back(ctx.token_pos[rows[r]]);
  }
  return out;
}

}  // namespace

absl::Status CheckSupported(const ModelConfig& config, int world) {
  const std::string& mt = config.model_type;
  if (mt != "qwen3_moe" && mt != "qwen3") {
    return absl::UnimplementedError("model_type " + mt + " is not supported by the cpu backend yet");
  }
  for (const auto& lt : config.layer_types) {
    if (lt != "full_attention") {
      return absl::UnimplementedError("layer type " + lt + " is not supported by the cpu backend yet");
    }
  }
  if (world < 1) return absl::InvalidArgumentError("tensor-parallel size must be >= 1");
  if (config.num_attention_heads % world != 0) {
    return absl::InvalidArgumentError("num_attention_heads (" + std::to_string(config.num_attention_heads) +
                                      ") is not divisible by the tensor-parallel size " + std::to_string(world));
  }
  const int64_t nkv = config.num_key_value_heads;
  if (nkv <= 0 || (nkv >= world ? nkv % world : world % nkv) != 0) {
    return absl::InvalidArgumentError("num_key_value_heads (" + std::to_string(nkv) +
                                      ") and the tensor-parallel size " + std::to_string(world) +
                                      " must divide one another");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> LoadCpuModel(const std::string& dir, const ModelConfig& config,
                                                    const ModelLoadOptions& options) {
  RETURN_IF_ERROR(CheckSupported(config, options.world));
  if (options.world > 1 && options.comm == nullptr) {
    return absl::InvalidArgumentError("tensor-parallel size " + std::to_string(options.world) + " needs a comm");
  }
  if (options.comm != nullptr && (options.comm->world_size() != options.world || options.comm->rank() != options.rank)) {
    return absl::InvalidArgumentError("comm is rank " + std::to_string(options.comm->rank()) + " of " +
                                      std::to_string(options.comm->world_size()) + ", options say rank " +
                                      std::to_string(options.rank) + " of " + std::to_string(options.world));
  }
  int threads = options.threads;
  if (threads <= 0) {
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / options.world);
  }
  ASSIGN_OR_RETURN(auto ckpt, Checkpoint::Open(dir));
  auto model = std::make_unique<CpuModel>(config, Shard{options.rank, options.world}, options.comm, threads);
  RETURN_IF_ERROR(model->LoadWeights(*ckpt));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace tandem::engine::cpu
