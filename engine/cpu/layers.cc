#include "engine/cpu/layers.h"

#include <cmath>
#include <string>

#include "common/status.h"
#include "engine/cpu/ops.h"

namespace tandem::engine::cpu {

namespace {

absl::StatusOr<std::vector<float>> ReadAll(const Checkpoint& ckpt, const std::string& name,
                                           const std::vector<int64_t>& shape) {
  ASSIGN_OR_RETURN(Tensor t, ckpt.Read(name, shape));
  return std::move(t.data);
}

absl::StatusOr<std::vector<float>> ReadPart(const Checkpoint& ckpt, const std::string& name,
                                            const std::vector<int64_t>& shape, int dim, int64_t start,
                                            int64_t len) {
  ASSIGN_OR_RETURN(Tensor t, ckpt.ReadSlice(name, shape, dim, start, len));
  return std::move(t.data);
}

absl::Status Indivisible(const std::string& what, int64_t n, int world) {
  return absl::InvalidArgumentError(what + " (" + std::to_string(n) +
                                    ") is not divisible by the tensor-parallel size " +
                                    std::to_string(world));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Attention

absl::StatusOr<std::unique_ptr<Attention>> Attention::Load(const Checkpoint& ckpt, const ModelConfig& cfg,
                                                           const std::string& prefix, Shard shard,
                                                           int64_t kv_layer) {
  auto a = std::make_unique<Attention>();
  const int64_t hidden = cfg.hidden_size, hd = cfg.head_dim;
  const int64_t nh = cfg.num_attention_heads, nkv = cfg.num_key_value_heads;
  const int W = shard.world, r = shard.rank;
  if (nh % W != 0) return Indivisible("num_attention_heads", nh, W);
  if (nh % nkv != 0) {
    return absl::InvalidArgumentError("num_attention_heads " + std::to_string(nh) +
                                      " is not a multiple of num_key_value_heads " + std::to_string(nkv));
  }
  // q heads split evenly. kv heads split evenly when there are at least as many as ranks;
  // otherwise each rank holds the one kv head its q heads read (replicated over world/nkv ranks).
  a->n_heads_ = nh / W;
  int64_t kv_start;
  if (nkv >= W) {
    if (nkv % W != 0) return Indivisible("num_key_value_heads", nkv, W);
    a->n_kv_heads_ = nkv / W;
    kv_start = r * a->n_kv_heads_;
  } else {
    if (W % nkv != 0) {
      return absl::InvalidArgumentError("tensor-parallel size " + std::to_string(W) +
                                        " is not a multiple of num_key_value_heads " + std::to_string(nkv));
    }
    a->n_kv_heads_ = 1;
    kv_start = static_cast<int64_t>(r) * nkv / W;  // = (first q head of rank r) / (nh / nkv)
  }
  a->hidden_ = hidden;
  a->head_dim_ = hd;
  a->rotary_dim_ = static_cast<int64_t>(std::llround(hd * cfg.partial_rotary_factor));
  a->kv_layer_ = kv_layer;
  a->eps_ = static_cast<float>(cfg.rms_norm_eps);
  const int64_t q_start = r * a->n_heads_;
  ASSIGN_OR_RETURN(a->wq_, ReadPart(ckpt, prefix + "q_proj.weight", {nh * hd, hidden}, 0, q_start * hd,
                                    a->n_heads_ * hd));
  ASSIGN_OR_RETURN(a->wk_, ReadPart(ckpt, prefix + "k_proj.weight", {nkv * hd, hidden}, 0, kv_start * hd,
                                    a->n_kv_heads_ * hd));
  ASSIGN_OR_RETURN(a->wv_, ReadPart(ckpt, prefix + "v_proj.weight", {nkv * hd, hidden}, 0, kv_start * hd,
                                    a->n_kv_heads_ * hd));
  ASSIGN_OR_RETURN(a->wo_, ReadPart(ckpt, prefix + "o_proj.weight", {hidden, nh * hd}, 1, q_start * hd,
                                    a->n_heads_ * hd));
  ASSIGN_OR_RETURN(a->q_norm_, ReadAll(ckpt, prefix + "q_norm.weight", {hd}));
  ASSIGN_OR_RETURN(a->k_norm_, ReadAll(ckpt, prefix + "k_norm.weight", {hd}));
  a->inv_freq_ = rope_inv_freq(cfg.rope_theta, a->rotary_dim_);
  return a;
}

absl::Status Attention::Forward(StepContext& ctx, const float* x, float* out) {
  const int64_t T = ctx.num_tokens(), hd = head_dim_;
  const int64_t q_dim = n_heads_ * hd, kv_dim = n_kv_heads_ * hd;
  std::vector<float> q(T * q_dim), k(T * kv_dim), v(T * kv_dim);  // (T, heads * head_dim)
  matmul(*ctx.pool, q.data(), x, wq_.data(), T, hidden_, q_dim);
  matmul(*ctx.pool, k.data(), x, wk_.data(), T, hidden_, kv_dim);
  matmul(*ctx.pool, v.data(), x, wv_.data(), T, hidden_, kv_dim);

  // Per-head RMSNorm of q and k, then RoPE at each token's position; k and v go into the cache.
  for (int64_t t = 0; t < T; ++t) {
    float* qt = q.data() + t * q_dim;
    float* kt = k.data() + t * kv_dim;
    rmsnorm(qt, qt, q_norm_.data(), n_heads_, hd, eps_);
    rmsnorm(kt, kt, k_norm_.data(), n_kv_heads_, hd, eps_);
    rope(qt, n_heads_, hd, rotary_dim_, ctx.token_pos[t], inv_freq_.data());
    rope(kt, n_kv_heads_, hd, rotary_dim_, ctx.token_pos[t], inv_freq_.data());
    const auto& table = ctx.batch->seqs[ctx.token_seq[t]].block_table;
    std::copy(kt, kt + kv_dim, ctx.kv->key(kv_layer_, table, ctx.token_pos[t]));
    std::copy(v.data() + t * kv_dim, v.data() + (t + 1) * kv_dim, ctx.kv->value(kv_layer_, table, ctx.token_pos[t]));
  }

  // Causal attention of every (token, q head) over positions 0..pos of its own sequence.
  // Local q head h reads local kv head h / (n_heads / n_kv_heads) (see Load for why that holds).
  const int64_t group = n_heads_ / n_kv_heads_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> att(T * q_dim);  // (T, n_heads * head_dim)
  ctx.pool->ParallelFor(T * n_heads_, [&](int64_t i0, int64_t i1) {
    std::vector<float> scores;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / n_heads_, h = i % n_heads_, kvh = h / group;
      const auto& table = ctx.batch->seqs[ctx.token_seq[t]].block_table;
      const int64_t pos = ctx.token_pos[t];
      const float* qh = q.data() + t * q_dim + h * hd;
      scores.resize(pos + 1);
      for (int64_t j = 0; j <= pos; ++j) {
        scores[j] = dot(qh, ctx.kv->key(kv_layer_, table, j) + kvh * hd, hd) * scale;
      }
      softmax(scores.data(), pos + 1);
      float* oh = att.data() + t * q_dim + h * hd;
      std::fill(oh, oh + hd, 0.0f);
      for (int64_t j = 0; j <= pos; ++j) {
        const float* vj = ctx.kv->value(kv_layer_, table, j) + kvh * hd;
        for (int64_t d = 0; d < hd; ++d) oh[d] += scores[j] * vj[d];
      }
    }
  });

  // o_proj is row-parallel: this rank's heads give a partial sum, all-reduced by the model.
  matmul(*ctx.pool, out, att.data(), wo_.data(), T, q_dim, hidden_);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// SwiGLU MLP and experts

absl::StatusOr<SwigluWeights> SwigluWeights::Load(const Checkpoint& ckpt, const std::string& prefix,
                                                  int64_t hidden, int64_t full_inter, Shard shard) {
  if (full_inter % shard.world != 0) {
    return Indivisible("intermediate size of " + prefix, full_inter, shard.world);
  }
  SwigluWeights w;
  w.hidden = hidden;
  w.inter = full_inter / shard.world;
  const int64_t start = shard.rank * w.inter;
  ASSIGN_OR_RETURN(w.gate, ReadPart(ckpt, prefix + "gate_proj.weight", {full_inter, hidden}, 0, start, w.inter));
  ASSIGN_OR_RETURN(w.up, ReadPart(ckpt, prefix + "up_proj.weight", {full_inter, hidden}, 0, start, w.inter));
  ASSIGN_OR_RETURN(w.down, ReadPart(ckpt, prefix + "down_proj.weight", {hidden, full_inter}, 1, start, w.inter));
  return w;
}

void SwigluWeights::Forward(ThreadPool& pool, const float* x, int64_t rows, float* out) const {
  std::vector<float> g(rows * inter), u(rows * inter);  // (rows, inter)
  matmul(pool, g.data(), x, gate.data(), rows, hidden, inter);
  matmul(pool, u.data(), x, up.data(), rows, hidden, inter);
  swiglu(g.data(), g.data(), u.data(), rows * inter);
  matmul(pool, out, g.data(), down.data(), rows, inter, hidden);
}

absl::StatusOr<std::unique_ptr<DenseMlp>> DenseMlp::Load(const Checkpoint& ckpt, const ModelConfig& cfg,
                                                         const std::string& prefix, Shard shard) {
  auto m = std::make_unique<DenseMlp>();
  ASSIGN_OR_RETURN(m->mlp_, SwigluWeights::Load(ckpt, prefix, cfg.hidden_size, cfg.intermediate_size, shard));
  return m;
}

absl::Status DenseMlp::Forward(StepContext& ctx, const float* x, float* out) {
  mlp_.Forward(*ctx.pool, x, ctx.num_tokens(), out);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MoeFfn>> MoeFfn::Load(const Checkpoint& ckpt, const ModelConfig& cfg,
                                                     const std::string& prefix, Shard shard) {
  auto m = std::make_unique<MoeFfn>();
  m->hidden_ = cfg.hidden_size;
  m->num_experts_ = cfg.num_experts;
  m->top_k_ = cfg.num_experts_per_tok;
  m->norm_topk_prob_ = cfg.norm_topk_prob;
  if (m->top_k_ <= 0 || m->top_k_ > m->num_experts_) {
    return absl::InvalidArgumentError("num_experts_per_tok " + std::to_string(m->top_k_) +
                                      " must be in [1, num_experts=" + std::to_string(m->num_experts_) + "]");
  }
  ASSIGN_OR_RETURN(m->router_, ReadAll(ckpt, prefix + "gate.weight", {m->num_experts_, m->hidden_}));
  m->experts_.reserve(m->num_experts_);
  for (int64_t e = 0; e < m->num_experts_; ++e) {
    ASSIGN_OR_RETURN(SwigluWeights w, SwigluWeights::Load(ckpt, prefix + "experts." + std::to_string(e) + ".",
                                                          m->hidden_, cfg.moe_intermediate_size, shard));
    m->experts_.push_back(std::move(w));
  }
  return m;
}

absl::Status MoeFfn::Forward(StepContext& ctx, const float* x, float* out) {
  const int64_t T = ctx.num_tokens(), E = num_experts_, K = top_k_, H = hidden_;
  // Router: p = softmax(W_g x) over all experts, top-k, renormalised when norm_topk_prob.
  std::vector<float> probs(T * E);  // (T, E)
  matmul(*ctx.pool, probs.data(), x, router_.data(), T, H, E);
  std::vector<std::vector<int32_t>> tokens_of(E);  // per expert: the tokens routed to it
  std::vector<std::vector<float>> weights_of(E);   // and their routing weights
  std::vector<int32_t> idx(K);
  std::vector<float> val(K);
  for (int64_t t = 0; t < T; ++t) {
    softmax(probs.data() + t * E, E);
    topk(idx.data(), val.data(), probs.data() + t * E, E, K);
    float sum = 0;
    for (float p : val) sum += p;
    for (int64_t j = 0; j < K; ++j) {
      tokens_of[idx[j]].push_back(static_cast<int32_t>(t));
      weights_of[idx[j]].push_back(norm_topk_prob_ ? val[j] / sum : val[j]);
    }
  }
  // Each expert runs once over the rows routed to it; outputs are added with their weights.
  std::fill(out, out + T * H, 0.0f);
  std::vector<float> xe, ye;
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = tokens_of[e];
    if (rows.empty()) continue;
    const int64_t n = static_cast<int64_t>(rows.size());
    xe.resize(n * H);
    ye.resize(n * H);
    for (int64_t i = 0; i < n; ++i) std::copy(x + rows[i] * H, x + (rows[i] + 1) * H, xe.data() + i * H);
    experts_[e].Forward(*ctx.pool, xe.data(), n, ye.data());
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + rows[i] * H;
      const float w = weights_of[e][i];
      for (int64_t d = 0; d < H; ++d) o[d] += w * ye[i * H + d];
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine::cpu
