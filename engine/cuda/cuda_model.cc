#include "engine/cuda/cuda_model.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "engine/cuda/device_collectives.h"
#include "engine/cuda/random_fill.h"
#include "engine/cuda/tp_shard.h"
#include "engine/model/checkpoint.h"
#include "engine/model/weight_names.h"
#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/qk_norm_rope.h"
#include "kernels/rmsnorm.h"
#include "kernels/norm_matmul.h"
#include "kernels/router_topk.h"
#include "kernels/silu_mul.h"

namespace tandem::engine::cuda {

namespace {

using kernels::bf16_bits;

// Steps of at most this many tokens fuse each RMSNorm into the product that follows it; larger ones
// (prefill chunks) keep add_rmsnorm + matmul_bf16, whose products switch to cuBLAS from 64 tokens.
constexpr int64_t kFuseNormMaxTokens = 32;

absl::Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(what + ": " + cudaGetErrorString(err));
}

// A device allocation owned by the model.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { Free(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    Free();
    p_ = o.p_, n_ = o.n_;
    o.p_ = nullptr, o.n_ = 0;
    return *this;
  }
  absl::Status Allocate(int64_t n) {
    Free();
    RETURN_IF_ERROR(CudaStatus(cudaMalloc(&p_, std::max<int64_t>(n, 1) * sizeof(T)),
                               "cudaMalloc of " + std::to_string(n * sizeof(T)) + " bytes"));
    n_ = n;
    return absl::OkStatus();
  }
  // Grows (contents lost) when smaller than n; true when it reallocated.
  bool Reserve(int64_t n) {
    if (n <= n_) return false;
    Free();
    CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
    n_ = n;
    return true;
  }
  void Free() {
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr, n_ = 0;
  }
  T* get() const { return p_; }
  int64_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
};

// This rank's shard (tp_shard.h): q_dim, kv_dim and I below are the rank's local sizes.
struct LayerWeights {
  DeviceArray<bf16_bits> input_norm, post_norm;  // (hidden)
  DeviceArray<bf16_bits> wqkv;                   // (q_dim + 2 kv_dim, hidden): q_proj, k_proj, v_proj rows
  DeviceArray<bf16_bits> wo;                     // (hidden, q_dim) the columns of this rank's heads
  DeviceArray<bf16_bits> q_norm, k_norm;         // (head_dim)
  bool moe = true;
  DeviceArray<bf16_bits> router;                 // (num_experts, hidden) replicated
  DeviceArray<bf16_bits> gate_up;                // moe: (E, 2 I, hidden); dense: (2 I, hidden)
  DeviceArray<bf16_bits> down;                   // moe: (E, hidden, I);   dense: (hidden, I)
};

// Activations for up to `tokens` tokens / `rows` logits rows (grown on demand).
struct Activations {
  DeviceArray<float> x, xn, delta;  // (T, hidden) residual stream, normed input, sublayer output
  DeviceArray<float> x2;            // (T, hidden) the residual's other half of the ping-pong (fused norms)
  DeviceArray<float> qkv;           // (T, q_dim + 2 kv_dim)
  DeviceArray<float> att;           // (T, q_dim)
  DeviceArray<float> router_logits; // (T, E)
  DeviceArray<int32_t> expert_ids;  // (T, K)
  DeviceArray<float> expert_w;      // (T, K)
  DeviceArray<float> act;           // (T*K, I) or dense (T, 2I) + (T, I)
  DeviceArray<float> attn_scratch;
  DeviceArray<uint32_t> attn_counters;  // (T, n_heads) partitions done per attention (0 between launches)
  DeviceArray<float> hn;            // (R, hidden) final-normed rows whose logits are wanted
  DeviceArray<float> logits;        // (R, vocab)
  DeviceArray<float> logits_local;  // TP: (R, vocab_per_rank) this rank's lm_head rows
  DeviceArray<float> logits_all;    // TP: (world, R, vocab_per_rank) gathered (rank 0 reads it)
  DeviceArray<int32_t> meta;        // tokens, pos, slot, token_seq, rows, block tables
};

// Where each field of the step's metadata sits in Activations::meta (and the pinned host copy).
struct MetaLayout {
  int64_t T = 0, R = 0, S = 0, max_blocks = 0;
  int64_t tokens() const { return 0; }
  int64_t pos() const { return T; }
  int64_t slot() const { return 2 * T; }
  int64_t token_seq() const { return 3 * T; }
  int64_t rows() const { return 4 * T; }
  int64_t tables() const { return 4 * T + R; }
  int64_t total() const { return 4 * T + R + S * max_blocks; }
};

class CudaModel final : public Model {
 public:
  // `comm` (not owned) is required when world > 1; the model runs on the current CUDA device.
  CudaModel(ModelConfig cfg, int rank, int world, Comm* comm)
      : cfg_(std::move(cfg)),
        rank_(rank),
        world_(world),
        shard_(ComputeTpShard(cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.intermediate_size,
                              cfg_.moe_intermediate_size, cfg_.vocab_size, rank, world)) {
    CUDA_CHECK(cudaGetDevice(&device_));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const char* g = std::getenv("TANDEM_CUDA_GRAPHS");
    use_graphs_ = !(g != nullptr && std::string(g) == "0");
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
    L_.n_heads = shard_.n_heads;
    L_.n_kv_heads = shard_.n_kv_heads;
    L_.head_dim = cfg_.head_dim;
    L_.rotary_dim = cfg_.RotaryDim();
    kv_spec_.num_layers = cfg_.num_hidden_layers;
    kv_spec_.num_kv_heads_local = L_.n_kv_heads;
    kv_spec_.head_dim = L_.head_dim;
    kv_spec_.bytes_per_element = sizeof(float);
  }
  ~CudaModel() override {
    ClearGraphs();
    if (host_meta_ != nullptr) cudaFreeHost(host_meta_);
    if (host_logits_ != nullptr) cudaFreeHost(host_logits_);
    cudaStreamDestroy(stream_);
  }

  absl::Status InitRope();
  absl::Status LoadWeights(const Checkpoint& ckpt);
  absl::Status RandomWeights(uint64_t seed);

  const ModelConfig& config() const override { return cfg_; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  KvCacheSpec kv_spec() const override { return kv_spec_; }
  int32_t kv_block_size() const override { return block_size_; }
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size) override;
  absl::StatusOr<Logits> Forward(const StepBatch& batch) override;

  absl::Status FillKvRandom(uint64_t seed);
  absl::StatusOr<CudaStepStats> MeasureStepStats(const StepBatch& batch);
  void set_use_graphs(bool on) { use_graphs_ = on && (coll_ == nullptr || coll_->capturable()); }
  void set_kv_f32(bool f32) {
    kv_f32_ = f32;
    kv_spec_.bytes_per_element = f32 ? sizeof(float) : sizeof(bf16_bits);
  }

 private:
  absl::Status CheckBatch(const StepBatch& batch) const;
  // Host metadata of a step (pinned), in MetaLayout order; returns the wanted rows.
  MetaLayout PrepareMeta(const StepBatch& batch, bool pad_for_graph);
  void Reserve(const MetaLayout& m);
  // Every kernel of one step, on stream_ (captured into a graph for decode steps), with the TP
  // collectives enqueued on the same stream; ends with the logits in a_.logits on rank 0.
  absl::Status RunLayers(const MetaLayout& m, int64_t max_positions, std::vector<int32_t>* ids_per_layer);
  // TP all-reduce #1 / #2 (partial sums of o_proj and of the ffn down projection); none at TP=1.
  absl::Status AllReduce(float* dev, int64_t n) {
    return coll_ == nullptr ? absl::OkStatus() : coll_->AllReduceSum(dev, static_cast<size_t>(n), stream_);
  }
  // Waits for the step (and its collectives, with the comm's deadline).
  absl::Status Sync() {
    return coll_ != nullptr ? coll_->Wait(stream_) : CudaStatus(cudaStreamSynchronize(stream_), "step");
  }
  void ClearGraphs();
  absl::Status UploadBf16(const Checkpoint& ckpt, const std::string& name, const std::vector<int64_t>& shape,
                          bf16_bits* dst) {
    return UploadSlice(ckpt, name, shape, 0, 0, shape.at(0), dst);
  }
  // Rows (dim 0) or columns (dim 1) [start, start + len) of a 1-D or 2-D tensor of `shape`, packed.
  absl::Status UploadSlice(const Checkpoint& ckpt, const std::string& name, const std::vector<int64_t>& shape,
                           int dim, int64_t start, int64_t len, bf16_bits* dst);

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
  bool last_graph_replayed_ = false;

  DeviceArray<bf16_bits> embed_;       // (vocab, hidden)
  DeviceArray<bf16_bits> lm_head_;     // (vocab_per_rank, hidden); empty when tied at TP=1 (embed_ is used)
  DeviceArray<bf16_bits> final_norm_;  // (hidden)
  DeviceArray<float> inv_freq_;        // (rotary_dim / 2)
  std::vector<LayerWeights> layers_;

  int32_t num_blocks_ = 0, block_size_ = 0;
  // (layers, num_blocks * block_size, n_kv_heads, head_dim), float32 (default: the golden bound
  // holds) or bf16 (half the bytes; see SetKvDtype).
  bool kv_f32_ = true;
  DeviceArray<uint8_t> k_cache_, v_cache_;

  Activations a_;
  int64_t cap_tokens_ = 0, cap_rows_ = 0, cap_meta_ = 0, cap_scratch_ = 0;
  int32_t* host_meta_ = nullptr;
  int64_t host_meta_cap_ = 0;
  float* host_logits_ = nullptr;
  int64_t host_logits_cap_ = 0;
  // Decode graphs by shape: the kernels read everything that changes between steps
  // (tokens, positions, slots, tables) from a.meta, which the step rewrites before the replay.
  std::map<std::tuple<int64_t, int64_t, int64_t>, cudaGraphExec_t> graphs_;  // (T, R, max_blocks)
  std::set<std::tuple<int64_t, int64_t, int64_t>> eager_shapes_;  // TP: shapes run once uncaptured
};

const bf16_bits* LmHead(const DeviceArray<bf16_bits>& head, const DeviceArray<bf16_bits>& embed) {
  return head.get() != nullptr ? head.get() : embed.get();
}

absl::Status CudaModel::UploadSlice(const Checkpoint& ckpt, const std::string& name,
                                    const std::vector<int64_t>& shape, int dim, int64_t start, int64_t len,
                                    bf16_bits* dst) {
  ASSIGN_OR_RETURN(TensorView v, ckpt.View(name));
  if (v.shape != shape) {
    std::string want, got;
    for (int64_t d : shape) want += std::to_string(d) + ",";
    for (int64_t d : v.shape) got += std::to_string(d) + ",";
    return absl::InvalidArgumentError("tensor '" + name + "' in " + v.file + ": expected shape [" + want +
                                      "], found [" + got + "]");
  }
  if (shape.empty() || shape.size() > 2 || dim < 0 || dim >= static_cast<int>(shape.size()) || start < 0 ||
      len < 0 || start + len > shape[dim]) {
    return absl::InvalidArgumentError("tensor '" + name + "': slice [" + std::to_string(start) + ", +" +
                                      std::to_string(len) + ") of dim " + std::to_string(dim) + " is out of range");
  }
  const int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
  if (v.dtype == DType::kBF16) {
    const auto* src = reinterpret_cast<const bf16_bits*>(v.data);
    if (dim == 0) {
      return CudaStatus(cudaMemcpy(dst, src + start * cols, len * cols * sizeof(bf16_bits), cudaMemcpyHostToDevice),
                        "upload " + name);
    }
    // Columns: a pitched copy of `rows` rows of `len` values each.
    return CudaStatus(cudaMemcpy2D(dst, len * sizeof(bf16_bits), src + start, cols * sizeof(bf16_bits),
                                   len * sizeof(bf16_bits), rows, cudaMemcpyHostToDevice),
                      "upload " + name);
  }
  // Other float dtypes (f32 / f16 norms in some checkpoints): through the float32 reader.
  ASSIGN_OR_RETURN(Tensor t, ckpt.ReadSlice(name, shape, dim, start, len));
  std::vector<bf16_bits> b(t.data.size());
  for (size_t i = 0; i < b.size(); ++i) b[i] = kernels::FloatToBf16(t.data[i]);
  return CudaStatus(cudaMemcpy(dst, b.data(), b.size() * sizeof(bf16_bits), cudaMemcpyHostToDevice), "upload " + name);
}

absl::Status CudaModel::LoadWeights(const Checkpoint& ckpt) {
  ASSIGN_OR_RETURN(const WeightNames names, ResolveWeightNames(ckpt, cfg_));
  const int64_t V = cfg_.vocab_size, H = cfg_.hidden_size, hd = L_.head_dim;
  const int64_t nh = cfg_.num_attention_heads, nkv = cfg_.num_key_value_heads;
  const int64_t qd = L_.q_dim(), kvd = L_.kv_dim(), E = cfg_.num_experts;  // local q / kv widths
  const int64_t I = shard_.moe_inter, I0 = shard_.moe_inter_start, FI = cfg_.moe_intermediate_size;
  const int64_t q0 = shard_.q_head_start * hd, kv0 = shard_.kv_head_start * hd;
  RETURN_IF_ERROR(embed_.Allocate(V * H));
  RETURN_IF_ERROR(UploadBf16(ckpt, names.Embed(), {V, H}, embed_.get()));
  RETURN_IF_ERROR(final_norm_.Allocate(H));
  RETURN_IF_ERROR(UploadBf16(ckpt, names.FinalNorm(), {H}, final_norm_.get()));
  // lm_head split by vocabulary (names.LmHead() is the embedding when tied); at TP=1 a tied head
  // reads embed_ itself. The rows past the vocabulary on the last rank stay zero.
  if (!cfg_.tie_word_embeddings || world_ > 1) {
    const int64_t Vr = shard_.vocab_per_rank;
    RETURN_IF_ERROR(lm_head_.Allocate(Vr * H));
    RETURN_IF_ERROR(CudaStatus(cudaMemset(lm_head_.get(), 0, Vr * H * sizeof(bf16_bits)), "zero lm_head"));
    if (shard_.vocab_len > 0) {
      RETURN_IF_ERROR(UploadSlice(ckpt, names.LmHead(), {V, H}, 0, shard_.vocab_start, shard_.vocab_len,
                                  lm_head_.get()));
    }
  }
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    LayerWeights w;
    auto up = [&](DeviceArray<bf16_bits>& dst, int64_t offset, const std::string& suffix,
                  const std::vector<int64_t>& shape) {
      return UploadBf16(ckpt, names.Layer(l, suffix), shape, dst.get() + offset);
    };
    // A shard: rows (dim 0) or columns (dim 1) [start, start + len) of the full `shape`.
    auto part = [&](DeviceArray<bf16_bits>& dst, int64_t offset, const std::string& suffix,
                    const std::vector<int64_t>& shape, int dim, int64_t start, int64_t len) {
      return UploadSlice(ckpt, names.Layer(l, suffix), shape, dim, start, len, dst.get() + offset);
    };
    RETURN_IF_ERROR(w.input_norm.Allocate(H));
    RETURN_IF_ERROR(w.post_norm.Allocate(H));
    RETURN_IF_ERROR(up(w.input_norm, 0, "input_layernorm.weight", {H}));
    RETURN_IF_ERROR(up(w.post_norm, 0, "post_attention_layernorm.weight", {H}));
    RETURN_IF_ERROR(w.wqkv.Allocate((qd + 2 * kvd) * H));
    RETURN_IF_ERROR(part(w.wqkv, 0, "self_attn.q_proj.weight", {nh * hd, H}, 0, q0, qd));
    RETURN_IF_ERROR(part(w.wqkv, qd * H, "self_attn.k_proj.weight", {nkv * hd, H}, 0, kv0, kvd));
    RETURN_IF_ERROR(part(w.wqkv, (qd + kvd) * H, "self_attn.v_proj.weight", {nkv * hd, H}, 0, kv0, kvd));
    RETURN_IF_ERROR(w.wo.Allocate(H * qd));
    RETURN_IF_ERROR(part(w.wo, 0, "self_attn.o_proj.weight", {H, nh * hd}, 1, q0, qd));
    RETURN_IF_ERROR(w.q_norm.Allocate(hd));
    RETURN_IF_ERROR(w.k_norm.Allocate(hd));
    RETURN_IF_ERROR(up(w.q_norm, 0, "self_attn.q_norm.weight", {hd}));
    RETURN_IF_ERROR(up(w.k_norm, 0, "self_attn.k_norm.weight", {hd}));
    w.moe = cfg_.IsMoeLayer(l);
    if (w.moe) {
      RETURN_IF_ERROR(w.router.Allocate(E * H));
      RETURN_IF_ERROR(up(w.router, 0, "mlp.gate.weight", {E, H}));
      RETURN_IF_ERROR(w.gate_up.Allocate(E * 2 * I * H));
      RETURN_IF_ERROR(w.down.Allocate(E * H * I));
      for (int64_t e = 0; e < E; ++e) {
        RETURN_IF_ERROR(UploadSlice(ckpt, names.Expert(l, e, "gate_proj"), {FI, H}, 0, I0, I,
                                    w.gate_up.get() + e * 2 * I * H));
        RETURN_IF_ERROR(UploadSlice(ckpt, names.Expert(l, e, "up_proj"), {FI, H}, 0, I0, I,
                                    w.gate_up.get() + (e * 2 + 1) * I * H));
        RETURN_IF_ERROR(UploadSlice(ckpt, names.Expert(l, e, "down_proj"), {H, FI}, 1, I0, I, w.down.get() + e * H * I));
      }
    } else {
      const int64_t DI = shard_.inter, D0 = shard_.inter_start, FD = cfg_.intermediate_size;
      RETURN_IF_ERROR(w.gate_up.Allocate(2 * DI * H));
      RETURN_IF_ERROR(w.down.Allocate(H * DI));
      RETURN_IF_ERROR(part(w.gate_up, 0, "mlp.gate_proj.weight", {FD, H}, 0, D0, DI));
      RETURN_IF_ERROR(part(w.gate_up, DI * H, "mlp.up_proj.weight", {FD, H}, 0, D0, DI));
      RETURN_IF_ERROR(part(w.down, 0, "mlp.down_proj.weight", {H, FD}, 1, D0, DI));
    }
    layers_.push_back(std::move(w));
  }
  return absl::OkStatus();
}

absl::Status CudaModel::RandomWeights(uint64_t seed) {
  const int64_t V = cfg_.vocab_size, H = cfg_.hidden_size, hd = L_.head_dim;
  const int64_t qd = L_.q_dim(), kvd = L_.kv_dim(), E = cfg_.num_experts, I = shard_.moe_inter;
  const int64_t DI = shard_.inter;
  // Uniform in [-s, s] with s = sqrt(3 / fan_in): unit-variance outputs for unit-variance inputs.
  // The same seeds on every rank: the replicated weights (embedding, router) agree across ranks,
  // so every rank routes to the same experts as a real TP group does. Fan-ins are the full sizes.
  auto fill = [&](DeviceArray<bf16_bits>& a, int64_t n, int64_t fan_in) -> absl::Status {
    RETURN_IF_ERROR(a.Allocate(n));
    fill_random_bf16(a.get(), n, std::sqrt(3.0f / static_cast<float>(fan_in)), seed++, stream_);
    return absl::OkStatus();
  };
  auto ones = [&](DeviceArray<bf16_bits>& a, int64_t n) -> absl::Status {
    RETURN_IF_ERROR(a.Allocate(n));
    fill_constant_bf16(a.get(), n, 1.0f, stream_);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(fill(embed_, V * H, 3));
  RETURN_IF_ERROR(ones(final_norm_, H));
  if (!cfg_.tie_word_embeddings || world_ > 1) RETURN_IF_ERROR(fill(lm_head_, shard_.vocab_per_rank * H, H));
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    LayerWeights w;
    RETURN_IF_ERROR(ones(w.input_norm, H));
    RETURN_IF_ERROR(ones(w.post_norm, H));
    RETURN_IF_ERROR(fill(w.wqkv, (qd + 2 * kvd) * H, H));
    RETURN_IF_ERROR(fill(w.wo, H * qd, cfg_.num_attention_heads * L_.head_dim));
    RETURN_IF_ERROR(ones(w.q_norm, hd));
    RETURN_IF_ERROR(ones(w.k_norm, hd));
    w.moe = cfg_.IsMoeLayer(l);
    if (w.moe) {
      RETURN_IF_ERROR(fill(w.router, E * H, H));
      RETURN_IF_ERROR(fill(w.gate_up, E * 2 * I * H, H));
      RETURN_IF_ERROR(fill(w.down, E * H * I, cfg_.moe_intermediate_size));
    } else {
      RETURN_IF_ERROR(fill(w.gate_up, 2 * DI * H, H));
      RETURN_IF_ERROR(fill(w.down, H * DI, cfg_.intermediate_size));
    }
    layers_.push_back(std::move(w));
  }
  return CudaStatus(cudaStreamSynchronize(stream_), "random weights");
}

absl::Status CudaModel::InitRope() {
  std::vector<float> inv(L_.rotary_dim / 2);
  for (size_t i = 0; i < inv.size(); ++i) {
    // As the cpu backend (and Hugging Face): exponent and power in float32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(L_.rotary_dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(cfg_.rope_theta), exponent);
  }
  RETURN_IF_ERROR(inv_freq_.Allocate(static_cast<int64_t>(inv.size())));
  return CudaStatus(cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice),
                    "upload inv_freq");
}

void CudaModel::ClearGraphs() {
  for (auto& [key, g] : graphs_) cudaGraphExecDestroy(g);
  graphs_.clear();
}

absl::Status CudaModel::AllocateKvCache(int32_t num_blocks, int32_t block_size) {
  if (num_blocks <= 0 || block_size <= 0) {
    return absl::InvalidArgumentError("kv cache needs num_blocks > 0 and block_size > 0");
  }
  ClearGraphs();
  k_cache_.Free();
  v_cache_.Free();
  const int64_t per_layer = static_cast<int64_t>(num_blocks) * block_size * L_.kv_dim() * kv_spec_.bytes_per_element;
  RETURN_IF_ERROR(k_cache_.Allocate(per_layer * cfg_.num_hidden_layers));
  RETURN_IF_ERROR(v_cache_.Allocate(per_layer * cfg_.num_hidden_layers));
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  return absl::OkStatus();
}

absl::Status CudaModel::FillKvRandom(uint64_t seed) {
  if (num_blocks_ == 0) return absl::FailedPreconditionError("FillKvRandom before AllocateKvCache");
  // Random bits as bf16 pairs: for a float32 cache each float is two random bf16 (finite values).
  fill_random_bf16(reinterpret_cast<bf16_bits*>(k_cache_.get()), k_cache_.size() / 2, 1.0f, seed, stream_);
  fill_random_bf16(reinterpret_cast<bf16_bits*>(v_cache_.get()), v_cache_.size() / 2, 1.0f, seed + 1, stream_);
  return CudaStatus(cudaStreamSynchronize(stream_), "fill kv");
}

absl::Status CudaModel::CheckBatch(const StepBatch& batch) const {
  if (num_blocks_ == 0) return absl::FailedPreconditionError("Forward before AllocateKvCache");
  for (const auto& s : batch.seqs) {
    const std::string who = "step: sequence " + std::to_string(s.seq_id) + ": ";
    if (s.tokens.empty()) return absl::InvalidArgumentError(who + "empty chunk");
    if (s.start_pos < 0) return absl::InvalidArgumentError(who + "negative start_pos");
    const int64_t end = s.start_pos + static_cast<int64_t>(s.tokens.size());
    if (static_cast<int64_t>(s.block_table.size()) * block_size_ < end) {
      return absl::InvalidArgumentError(who + "block table of " + std::to_string(s.block_table.size()) +
                                        " blocks does not cover " + std::to_string(end) + " positions");
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= num_blocks_) {
        return absl::InvalidArgumentError(who + "block id " + std::to_string(b) + " outside the pool of " +
                                          std::to_string(num_blocks_));
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

MetaLayout CudaModel::PrepareMeta(const StepBatch& batch, bool pad_for_graph) {
  MetaLayout m;
  m.T = batch.num_tokens();
  m.S = static_cast<int64_t>(batch.seqs.size());
  for (const auto& s : batch.seqs) {
    m.max_blocks = std::max<int64_t>(m.max_blocks, static_cast<int64_t>(s.block_table.size()));
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    m.R += s.want_all_logits ? n : (s.want_logits ? 1 : 0);
  }
  // A graph serves every step of the same shape up to its table width: round the width up to a
  // power of two so that a growing sequence recaptures only log(n) times.
  if (pad_for_graph) {
    int64_t w = 1;
    while (w < m.max_blocks) w *= 2;
    m.max_blocks = w;
  }
  if (host_meta_cap_ < m.total()) {
    if (host_meta_ != nullptr) cudaFreeHost(host_meta_);
    host_meta_cap_ = std::max<int64_t>(m.total(), 2 * host_meta_cap_);
    CUDA_CHECK(cudaMallocHost(&host_meta_, host_meta_cap_ * sizeof(int32_t)));
  }
  int32_t* h = host_meta_;
  std::fill(h, h + m.total(), 0);  // padded table entries point at block 0 and are never read
  int64_t t = 0, r = 0;
  for (int64_t s = 0; s < m.S; ++s) {
    const SeqChunk& c = batch.seqs[s];
    const int64_t n = static_cast<int64_t>(c.tokens.size());
    std::copy(c.block_table.begin(), c.block_table.end(), h + m.tables() + s * m.max_blocks);
    for (int64_t i = 0; i < n; ++i, ++t) {
      const int32_t p = c.start_pos + static_cast<int32_t>(i);
      h[m.tokens() + t] = c.tokens[i];
      h[m.pos() + t] = p;
      h[m.slot() + t] = c.block_table[p / block_size_] * block_size_ + p % block_size_;
      h[m.token_seq() + t] = static_cast<int32_t>(s);
      if (c.want_all_logits || (c.want_logits && i == n - 1)) h[m.rows() + r++] = static_cast<int32_t>(t);
    }
  }
  return m;
}

void CudaModel::Reserve(const MetaLayout& m) {
  const int64_t H = cfg_.hidden_size, T = m.T, K = std::max<int64_t>(cfg_.num_experts_per_tok, 1);
  const int64_t E = std::max<int64_t>(cfg_.num_experts, 1);
  const int64_t act = std::max(T * K * shard_.moe_inter, 3 * T * shard_.inter);
  const kernels::AttentionShape attn{L_.n_heads, L_.n_kv_heads, L_.head_dim, block_size_, m.max_blocks, L_.row()};
  const int64_t scratch = kernels::attention_scratch_floats(T, attn, m.max_blocks * block_size_);
  bool grew = false;
  if (T > cap_tokens_) {
    cap_tokens_ = T;
    grew |= a_.x.Reserve(T * H) | a_.x2.Reserve(T * H) | a_.xn.Reserve(T * H) | a_.delta.Reserve(T * H);
    grew |= a_.qkv.Reserve(T * L_.row()) | a_.att.Reserve(T * L_.q_dim());
    grew |= a_.router_logits.Reserve(T * E) | a_.expert_ids.Reserve(T * K) | a_.expert_w.Reserve(T * K);
    grew |= a_.act.Reserve(act);
  }
  if (m.R > cap_rows_) {
    cap_rows_ = m.R;
    grew |= a_.hn.Reserve(m.R * H) | a_.logits.Reserve(m.R * cfg_.vocab_size);
    if (world_ > 1) {
      const int64_t Vr = shard_.vocab_per_rank;
      grew |= a_.logits_local.Reserve(m.R * Vr) | a_.logits_all.Reserve(world_ * m.R * Vr);
    }
  }
  grew |= a_.meta.Reserve(m.total());
  grew |= a_.attn_scratch.Reserve(scratch);
  const int64_t counters = kernels::attention_counter_count(T, attn);
  if (a_.attn_counters.Reserve(counters)) {  // on stream_: ordered before the step's kernels
    CUDA_CHECK(cudaMemsetAsync(a_.attn_counters.get(), 0, counters * sizeof(uint32_t), stream_));
    grew = true;
  }
  if (grew) ClearGraphs();  // captured graphs hold the old addresses
}

absl::Status CudaModel::RunLayers(const MetaLayout& m, int64_t max_positions, std::vector<int32_t>* ids_per_layer) {
  const int64_t T = m.T, H = cfg_.hidden_size, E = cfg_.num_experts, K = cfg_.num_experts_per_tok;
  const int64_t I = shard_.moe_inter, V = cfg_.vocab_size;  // I: this rank's slice of each expert
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const int32_t* meta = a_.meta.get();
  const int64_t slots = static_cast<int64_t>(num_blocks_) * block_size_;
  kernels::AttentionShape A{L_.n_heads, L_.n_kv_heads, L_.head_dim, block_size_, m.max_blocks, L_.row()};
  const float scale = 1.0f / std::sqrt(static_cast<float>(L_.head_dim));

  kernels::embedding(a_.x.get(), meta + m.tokens(), embed_.get(), T, H, stream_);
  // Decode-sized steps fold each norm into the product after it (kernels/norm_matmul.h): the
  // residual then alternates between x and x2, since every block of that product still reads the
  // old one. Prefill-sized steps keep the separate norm so the products can take the GEMM path.
  const bool fuse = T <= kFuseNormMaxTokens;
  float* xa = a_.x.get();   // the residual stream now
  float* xb = a_.x2.get();  // where a fused norm writes the next one
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerWeights& w = layers_[l];
    const int64_t layer_bytes = l * slots * L_.kv_dim() * kv_spec_.bytes_per_element;
    uint8_t* kc = k_cache_.get() + layer_bytes;
    uint8_t* vc = v_cache_.get() + layer_bytes;
    // Attention: h = x + o_proj(attn(norm(x))). The previous layer's ffn output is added here.
    const float* prev_delta = l == 0 ? nullptr : a_.delta.get();
    if (fuse) {
      kernels::add_rmsnorm_matmul(a_.qkv.get(), xb, nullptr, xa, prev_delta, w.input_norm.get(), w.wqkv.get(), T, H,
                                  L_.row(), eps, stream_);
      std::swap(xa, xb);
    } else {
      kernels::add_rmsnorm(a_.xn.get(), xa, prev_delta, w.input_norm.get(), T, H, eps, stream_);
      kernels::matmul_bf16(a_.qkv.get(), a_.xn.get(), w.wqkv.get(), T, H, L_.row(), stream_);
    }
    if (kv_f32_) {
      auto* kf = reinterpret_cast<float*>(kc);
      auto* vf = reinterpret_cast<float*>(vc);
      kernels::qk_norm_rope_store_kv(a_.qkv.get(), kf, vf, w.q_norm.get(), w.k_norm.get(), inv_freq_.get(),
                                     meta + m.pos(), meta + m.slot(), T, L_, eps, stream_);
      kernels::paged_attention(a_.att.get(), a_.attn_scratch.get(), a_.attn_counters.get(), a_.qkv.get(), kf, vf,
                               meta + m.tables(), meta + m.token_seq(), meta + m.pos(), T, A, max_positions, scale,
                               stream_);
    } else {
      auto* kb = reinterpret_cast<bf16_bits*>(kc);
      auto* vb = reinterpret_cast<bf16_bits*>(vc);
      kernels::qk_norm_rope_store_kv(a_.qkv.get(), kb, vb, w.q_norm.get(), w.k_norm.get(), inv_freq_.get(),
                                     meta + m.pos(), meta + m.slot(), T, L_, eps, stream_);
      kernels::paged_attention(a_.att.get(), a_.attn_scratch.get(), a_.attn_counters.get(), a_.qkv.get(), kb, vb,
                               meta + m.tables(), meta + m.token_seq(), meta + m.pos(), T, A, max_positions, scale,
                               stream_);
    }
    kernels::matmul_bf16(a_.delta.get(), a_.att.get(), w.wo.get(), T, L_.q_dim(), H, stream_);
    RETURN_IF_ERROR(AllReduce(a_.delta.get(), T * H));  // all-reduce #1: o_proj partial sums
    // Ffn: out = h + ffn(norm(h)).
    if (fuse && w.moe) {  // the router product normalises (and stores xn for the experts)
      kernels::add_rmsnorm_matmul(a_.router_logits.get(), xb, a_.xn.get(), xa, a_.delta.get(), w.post_norm.get(),
                                  w.router.get(), T, H, E, eps, stream_);
      std::swap(xa, xb);
    } else {
      kernels::add_rmsnorm(a_.xn.get(), xa, a_.delta.get(), w.post_norm.get(), T, H, eps, stream_);
      if (w.moe) kernels::matmul_bf16(a_.router_logits.get(), a_.xn.get(), w.router.get(), T, H, E, stream_);
    }
    if (w.moe) {
      kernels::router_topk(a_.expert_ids.get(), a_.expert_w.get(), a_.router_logits.get(), T, E, K,
                           cfg_.norm_topk_prob, stream_);
      kernels::moe_gate_up(a_.act.get(), a_.xn.get(), a_.expert_ids.get(), w.gate_up.get(), T, K, H, I, stream_);
      kernels::moe_down(a_.delta.get(), a_.act.get(), a_.expert_ids.get(), a_.expert_w.get(), w.down.get(), T, K, H,
                        I, stream_, /*follows_gate_up=*/true);
      if (ids_per_layer != nullptr) {
        std::vector<int32_t> ids(T * K);
        CUDA_CHECK(cudaMemcpyAsync(ids.data(), a_.expert_ids.get(), T * K * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                   stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        ids_per_layer->push_back(static_cast<int32_t>(std::set<int32_t>(ids.begin(), ids.end()).size()));
      }
    } else {
      const int64_t DI = shard_.inter;
      float* gu = a_.act.get();             // (T, 2 DI)
      float* hidden = gu + 2 * T * DI;      // (T, DI)
      kernels::matmul_bf16(gu, a_.xn.get(), w.gate_up.get(), T, H, 2 * DI, stream_);
      kernels::silu_mul(hidden, gu, T, DI, stream_);
      kernels::matmul_bf16(a_.delta.get(), hidden, w.down.get(), T, DI, H, stream_);
    }
    RETURN_IF_ERROR(AllReduce(a_.delta.get(), T * H));  // all-reduce #2: expert / MLP partial sums
  }
  // Final norm (adding the last ffn output), then lm_head over the wanted rows only.
  kernels::add_rmsnorm(a_.xn.get(), xa, a_.delta.get(), final_norm_.get(), T, H, eps, stream_);
  kernels::gather_rows(a_.hn.get(), a_.xn.get(), meta + m.rows(), m.R, H, stream_);
  if (world_ == 1) {
    kernels::matmul_bf16(a_.logits.get(), a_.hn.get(), LmHead(lm_head_, embed_), m.R, H, V, stream_);
    return absl::OkStatus();
  }
  // TP: this rank's vocabulary slice, gathered on rank 0 as (world, R, Vr), then laid out as
  // (R, vocab) there: rank w's columns [w Vr, w Vr + n_w) of every row (the padding rows dropped).
  const int64_t Vr = shard_.vocab_per_rank, R = m.R;
  if (R == 0) return absl::OkStatus();
  kernels::matmul_bf16(a_.logits_local.get(), a_.hn.get(), lm_head_.get(), R, H, Vr, stream_);
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

absl::StatusOr<Logits> CudaModel::Forward(const StepBatch& batch) {
  RETURN_IF_ERROR(CheckBatch(batch));
  if (batch.seqs.empty()) return Logits{};
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));  // the caller's thread may differ
  bool decode = true;
  for (const auto& s : batch.seqs) decode &= s.tokens.size() == 1;
  const bool graph = use_graphs_ && decode;
  const MetaLayout m = PrepareMeta(batch, graph);
  Reserve(m);
  CUDA_CHECK(cudaMemcpyAsync(a_.meta.get(), host_meta_, m.total() * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  last_graph_replayed_ = false;
  if (graph) {
    // Partitions for the whole table width: the graph stays valid as positions grow within it.
    const auto key = std::make_tuple(m.T, m.R, m.max_blocks);
    auto it = graphs_.find(key);
    // TP (NCCL): the first step of a shape runs eagerly, so that NCCL sets up its connections and
    // buffers for these sizes outside a capture; the shape's second step is captured.
    if (it == graphs_.end() && coll_ != nullptr && eager_shapes_.insert(key).second) {
      RETURN_IF_ERROR(RunLayers(m, m.max_blocks * block_size_, nullptr));
    } else if (it == graphs_.end()) {
      cudaGraph_t g;
      CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      absl::Status st = RunLayers(m, m.max_blocks * block_size_, nullptr);
      if (!st.ok()) {
        // End the capture (the stream is unusable while capturing) and drop the partial graph.
        if (cudaStreamEndCapture(stream_, &g) == cudaSuccess && g != nullptr) cudaGraphDestroy(g);
        cudaGetLastError();
        return st;
      }
      CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
      cudaGraphExec_t exec;
      CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
      cudaGraphDestroy(g);
      it = graphs_.emplace(key, exec).first;
    }
    if (it != graphs_.end()) {
      CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
      last_graph_replayed_ = true;
    }
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
  if (host_logits_cap_ < m.R * V) {
    if (host_logits_ != nullptr) cudaFreeHost(host_logits_);
    host_logits_cap_ = m.R * V;
    CUDA_CHECK(cudaMallocHost(&host_logits_, host_logits_cap_ * sizeof(float)));
  }
  CUDA_CHECK(cudaMemcpyAsync(host_logits_, a_.logits.get(), m.R * V * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  RETURN_IF_ERROR(Sync());
  out.vocab = V;
  out.data.assign(host_logits_, host_logits_ + m.R * V);
  int64_t t = 0;
  for (const auto& s : batch.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    for (int64_t i = 0; i < n; ++i, ++t) {
      if (s.want_all_logits || (s.want_logits && i == n - 1)) {
        out.seq_ids.push_back(s.seq_id);
        out.positions.push_back(s.start_pos + static_cast<int32_t>(i));
      }
    }
  }
  return out;
}

absl::StatusOr<CudaStepStats> CudaModel::MeasureStepStats(const StepBatch& batch) {
  RETURN_IF_ERROR(CheckBatch(batch));
  if (batch.seqs.empty()) return CudaStepStats{};
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  const MetaLayout m = PrepareMeta(batch, false);
  Reserve(m);
  CUDA_CHECK(cudaMemcpyAsync(a_.meta.get(), host_meta_, m.total() * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
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

}  // namespace

absl::Status CheckSupported(const ModelConfig& config, int world) {
  const std::string& mt = config.model_type;
  if (mt != "qwen3_moe" && mt != "qwen3") {
    return absl::UnimplementedError("model_type " + mt + " is not supported by the cuda backend yet");
  }
  for (const auto& lt : config.layer_types) {
    if (lt != "full_attention") {
      return absl::UnimplementedError("layer type " + lt + " is not supported by the cuda backend yet");
    }
  }
  // Tensor parallelism: the cpu backend's sharding (tp_shard.h), so the same divisibility.
  if (world < 1) return absl::InvalidArgumentError("tensor-parallel size must be >= 1");
  auto indivisible = [&](const std::string& what, int64_t n) {
    return absl::InvalidArgumentError(what + " (" + std::to_string(n) + ") is not divisible by the tensor-parallel size " +
                                      std::to_string(world));
  };
  if (config.num_attention_heads % world != 0) return indivisible("num_attention_heads", config.num_attention_heads);
  const int64_t nkv = config.num_key_value_heads;
  if (nkv <= 0 || config.num_attention_heads % nkv != 0 || (nkv >= world ? nkv % world : world % nkv) != 0) {
    return absl::InvalidArgumentError("num_key_value_heads (" + std::to_string(nkv) + ") and the tensor-parallel size " +
                                      std::to_string(world) + " must divide one another (and divide the q heads)");
  }
  if (config.moe_intermediate_size % world != 0) return indivisible("moe_intermediate_size", config.moe_intermediate_size);
  if (config.intermediate_size % world != 0) return indivisible("intermediate_size", config.intermediate_size);
  if (config.head_dim % 32 != 0 || config.head_dim > 256) {
    return absl::UnimplementedError("cuda backend: head_dim must be 32, 64, 128 or 256");
  }
  // The matmul kernels read 8 bf16 (16 bytes) at a time along `in`: each rank's slice too.
  if (config.hidden_size % 8 != 0 || (config.moe_intermediate_size / world) % 8 != 0 ||
      (config.intermediate_size / world) % 8 != 0) {
    return absl::UnimplementedError("cuda backend: hidden and (per-rank) intermediate sizes must be multiples of 8");
  }
  if (config.num_experts > 256) return absl::UnimplementedError("cuda backend: at most 256 experts");
  if (config.attention_bias) return absl::UnimplementedError("cuda backend: attention_bias is not supported");
  return absl::OkStatus();
}

namespace {
absl::StatusOr<CudaModel*> AsCuda(Model& model) {
  auto* m = dynamic_cast<CudaModel*>(&model);
  if (m == nullptr) return absl::InvalidArgumentError("not a cuda model");
  return m;
}
}  // namespace

namespace {
absl::Status CheckComm(const ModelLoadOptions& o) {
  if (o.world > 1 && o.comm == nullptr) {
    return absl::InvalidArgumentError("tensor-parallel size " + std::to_string(o.world) + " needs a comm");
  }
  if (o.comm != nullptr && (o.comm->world_size() != o.world || o.comm->rank() != o.rank)) {
    return absl::InvalidArgumentError("comm is rank " + std::to_string(o.comm->rank()) + " of " +
                                      std::to_string(o.comm->world_size()) + ", options say rank " +
                                      std::to_string(o.rank) + " of " + std::to_string(o.world));
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadCudaModel(const std::string& dir, const ModelConfig& config,
                                                     const ModelLoadOptions& options) {
  RETURN_IF_ERROR(CheckSupported(config, options.world));
  RETURN_IF_ERROR(CheckComm(options));
  RETURN_IF_ERROR(CheckDevice());
  ASSIGN_OR_RETURN(auto ckpt, Checkpoint::Open(dir));
  auto model = std::make_unique<CudaModel>(config, options.rank, options.world, options.comm);
  RETURN_IF_ERROR(model->InitRope());
  RETURN_IF_ERROR(model->LoadWeights(*ckpt));
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<std::unique_ptr<Model>> CreateSyntheticCudaModel(const ModelConfig& config, uint64_t seed,
                                                                const ModelLoadOptions& tp) {
  RETURN_IF_ERROR(CheckSupported(config, tp.world));
  RETURN_IF_ERROR(CheckComm(tp));
  RETURN_IF_ERROR(CheckDevice());
  auto model = std::make_unique<CudaModel>(config, tp.rank, tp.world, tp.comm);
  RETURN_IF_ERROR(model->InitRope());
  RETURN_IF_ERROR(model->RandomWeights(seed));
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<std::unique_ptr<Model>> CreateSyntheticCudaModel(const ModelConfig& config, uint64_t seed) {
  return CreateSyntheticCudaModel(config, seed, ModelLoadOptions{});
}

absl::StatusOr<int32_t> KvBlocksFromDeviceMemory(const Model& model, double memory_fraction, int32_t block_size) {
  if (!(memory_fraction > 0.0 && memory_fraction <= 1.0)) {
    return absl::InvalidArgumentError("memory_fraction must be in (0, 1]");
  }
  size_t free_b = 0, total_b = 0;
  RETURN_IF_ERROR(CudaStatus(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
  const double used = static_cast<double>(total_b - free_b);
  const double budget = memory_fraction * static_cast<double>(total_b) - used;
  const double per_block = static_cast<double>(model.kv_spec().bytes_per_token()) * block_size;
  if (budget < per_block) {
    return absl::ResourceExhaustedError("no room for the KV pool: " + std::to_string(memory_fraction) +
                                        " of the device's memory is already used (" +
                                        std::to_string(static_cast<int64_t>(used) >> 20) + " MiB in use)");
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
  if (dtype != "f32" && dtype != "bf16") return absl::InvalidArgumentError("kv dtype must be f32 or bf16, not " + dtype);
  if (m->kv_block_size() > 0) return absl::FailedPreconditionError("SetKvDtype after AllocateKvCache");
  m->set_kv_f32(dtype == "f32");
  return absl::OkStatus();
}

void SetUseGraphs(Model& model, bool on) {
  if (auto* m = dynamic_cast<CudaModel*>(&model)) m->set_use_graphs(on);
}

}  // namespace tandem::engine::cuda
