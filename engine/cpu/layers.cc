#include "engine/cpu/layers.h"

#include <cmath>

#include "common/status.h"
#include "engine/cpu/linear_attention.h"
#include "engine/cpu/ops.h"

namespace tandem::engine::cpu {

absl::StatusOr<std::vector<float>> ReadWeight(const Checkpoint& ckpt, const WeightSpec& spec) {
  std::vector<float> out(spec.numel(), 0.0f);
  int64_t at = 0;
  for (const WeightSlice& s : spec.slices) {
    ASSIGN_OR_RETURN(Tensor t, ReadWeightSlice(ckpt, s));
    if (at + static_cast<int64_t>(t.data.size()) > spec.numel()) {
      return absl::InternalError("weight slices of " + s.name + " exceed their packed shape");
    }
    std::copy(t.data.begin(), t.data.end(), out.begin() + at);
    at += static_cast<int64_t>(t.data.size());
  }
  return out;
}

absl::StatusOr<std::vector<float>> ReadNorm(const Checkpoint& ckpt, const WeightSpec& spec, bool zero_centered) {
  ASSIGN_OR_RETURN(std::vector<float> w, ReadWeight(ckpt, spec));
  if (zero_centered) {
    for (float& v : w) v = 1.0f + v;
  }
  return w;
}

// ---------------------------------------------------------------------------------------------
// Attention

absl::StatusOr<std::unique_ptr<Attention>> Attention::Load(const Checkpoint& ckpt, const AttentionWeightSpec& spec,
                                                           const ModelConfig& cfg, const TpShard& shard,
                                                           int64_t kv_layer, kernels::KvScale kv_scale) {
  auto a = std::make_unique<Attention>();
  a->L_ = kernels::QkvLayout{shard.n_heads, shard.n_kv_heads, cfg.head_dim, cfg.RotaryDim()};
  a->hidden_ = cfg.hidden_size;
  a->kv_layer_ = kv_layer;
  a->kv_scale_ = kv_scale;
  a->eps_ = static_cast<float>(cfg.rms_norm_eps);
  ASSIGN_OR_RETURN(a->wqkv_, ReadWeight(ckpt, spec.wqkv));
  ASSIGN_OR_RETURN(a->wo_, ReadWeight(ckpt, spec.wo));
  ASSIGN_OR_RETURN(a->q_norm_, ReadNorm(ckpt, spec.q_norm, cfg.zero_centered_norms));
  ASSIGN_OR_RETURN(a->k_norm_, ReadNorm(ckpt, spec.k_norm, cfg.zero_centered_norms));
  if (cfg.attention_output_gate) {
    ASSIGN_OR_RETURN(a->wgate_, ReadWeight(ckpt, spec.gate));
    if (static_cast<int64_t>(a->wgate_.size()) != a->L_.q_dim() * a->hidden_) {
      return absl::InternalError("attention output gate has " + std::to_string(a->wgate_.size()) + " values, want " +
                                 std::to_string(a->L_.q_dim() * a->hidden_));
    }
  }
  return a;
}

template <typename KV>
void Attention::Attend(StepContext& ctx, float* qkv, float* att, kernels::KvScale kv_scale) {
  const StepMeta& m = ctx.m;
  const int64_t T = ctx.num_tokens(), hd = L_.head_dim;
  // Per-head RMSNorm of q and k, then RoPE at each token's position; k and v go into the cache.
  KV* k_cache = ctx.kv->keys<KV>(kv_layer_);
  KV* v_cache = ctx.kv->values<KV>(kv_layer_);
  qk_norm_rope_store_kv(qkv, k_cache, v_cache, q_norm_.data(), k_norm_.data(), ctx.inv_freq, ctx.meta + m.pos(),
                        ctx.meta + m.slot(), T, L_, eps_, kv_scale);
  // Causal attention of every (token, q head) over positions 0..pos of its own sequence.
  const kernels::AttentionShape A{L_.n_heads, L_.n_kv_heads, hd, ctx.block_size, m.max_blocks, L_.row()};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  paged_attention(ctx.pool, att, qkv, k_cache, v_cache, ctx.meta + m.tables(), ctx.meta + m.token_seq(),
                  ctx.meta + m.pos(), T, A, scale, kv_scale);
}

absl::Status Attention::Forward(StepContext& ctx, const float* x, float* out) {
  const int64_t T = ctx.num_tokens();
  // One product for q, k and v: (T, q_dim + 2 kv_dim), each token's row [q | k | v].
  std::vector<float> qkv(T * L_.row());
  matmul(ctx.pool, qkv.data(), x, wqkv_.data(), T, hidden_, L_.row());
  std::vector<float> att(T * L_.q_dim());  // (T, n_heads * head_dim)
  switch (ctx.kv->dtype()) {
    case KvDtype::kF32: Attend<float>(ctx, qkv.data(), att.data(), {}); break;
    case KvDtype::kBf16: Attend<bf16_bits>(ctx, qkv.data(), att.data(), {}); break;
    case KvDtype::kFp8: Attend<fp8_e4m3>(ctx, qkv.data(), att.data(), kv_scale_); break;
  }
  if (!wgate_.empty()) {  // gated attention: each head's output times sigmoid(its gate)
    std::vector<float> gate(T * L_.q_dim());
    matmul(ctx.pool, gate.data(), x, wgate_.data(), T, hidden_, L_.q_dim());
    sigmoid_gate(att.data(), gate.data(), T, L_.q_dim(), L_.q_dim());
  }
  // o_proj is row-parallel: this rank's heads give a partial sum, all-reduced by the model.
  matmul(ctx.pool, out, att.data(), wo_.data(), T, L_.q_dim(), hidden_);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Dense MLP and routed experts

absl::StatusOr<std::unique_ptr<DenseMlp>> DenseMlp::Load(const Checkpoint& ckpt, const MlpWeightSpec& spec,
                                                         const ModelConfig& cfg, const TpShard& shard) {
  auto m = std::make_unique<DenseMlp>();
  m->hidden_ = cfg.hidden_size;
  m->inter_ = shard.inter;
  ASSIGN_OR_RETURN(m->gate_up_, ReadWeight(ckpt, spec.gate_up));
  ASSIGN_OR_RETURN(m->down_, ReadWeight(ckpt, spec.down));
  return m;
}

absl::Status DenseMlp::Forward(StepContext& ctx, const float* x, float* out) {
  const int64_t T = ctx.num_tokens();
  std::vector<float> gate_up(T * 2 * inter_), act(T * inter_);
  matmul(ctx.pool, gate_up.data(), x, gate_up_.data(), T, hidden_, 2 * inter_);
  silu_mul(act.data(), gate_up.data(), T, inter_);
  matmul(ctx.pool, out, act.data(), down_.data(), T, inter_, hidden_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MoeFfn>> MoeFfn::Load(const Checkpoint& ckpt, const MoeWeightSpec& spec,
                                                     const ModelConfig& cfg, const TpShard& shard) {
  auto m = std::make_unique<MoeFfn>();
  m->hidden_ = cfg.hidden_size;
  m->num_experts_ = cfg.num_experts;
  m->top_k_ = cfg.num_experts_per_tok;
  m->inter_ = shard.moe_inter;
  m->norm_topk_prob_ = cfg.norm_topk_prob;
  ASSIGN_OR_RETURN(m->router_, ReadWeight(ckpt, spec.router));
  ASSIGN_OR_RETURN(m->gate_up_, ReadWeight(ckpt, spec.gate_up));
  ASSIGN_OR_RETURN(m->down_, ReadWeight(ckpt, spec.down));
  if (spec.shared) {
    m->shared_inter_ = shard.shared_inter;
    ASSIGN_OR_RETURN(m->shared_gate_up_, ReadWeight(ckpt, spec.shared_expert.gate_up));
    ASSIGN_OR_RETURN(m->shared_down_, ReadWeight(ckpt, spec.shared_expert.down));
    ASSIGN_OR_RETURN(m->shared_gate_, ReadWeight(ckpt, spec.shared_expert.gate));
  }
  return m;
}

absl::Status MoeFfn::Forward(StepContext& ctx, const float* x, float* out) {
  const int64_t T = ctx.num_tokens(), E = num_experts_, K = top_k_, H = hidden_, I = inter_;
  std::vector<float> logits(T * E), weights(T * K), act(T * K * I);
  std::vector<int32_t> ids(T * K);
  matmul(ctx.pool, logits.data(), x, router_.data(), T, H, E);
  router_topk(ids.data(), weights.data(), logits.data(), T, E, K, norm_topk_prob_);
  // Each expert runs once over the tokens routed to it; outputs are added with their weights.
  moe_gate_up(ctx.pool, act.data(), x, ids.data(), gate_up_.data(), T, K, H, I);
  moe_down(ctx.pool, out, act.data(), ids.data(), weights.data(), down_.data(), T, K, H, I);
  if (shared_inter_ > 0) {  // out += sigmoid(shared_expert_gate x) * shared_expert(x), per token
    const int64_t S = shared_inter_;
    std::vector<float> gu(T * 2 * S), sa(T * S), so(T * H), sg(T);
    matmul(ctx.pool, gu.data(), x, shared_gate_up_.data(), T, H, 2 * S);
    silu_mul(sa.data(), gu.data(), T, S);
    matmul(ctx.pool, so.data(), sa.data(), shared_down_.data(), T, S, H);
    matmul(ctx.pool, sg.data(), x, shared_gate_.data(), T, H, 1);
    for (int64_t t = 0; t < T; ++t) {
      const float g = sigmoid(sg[t]);
      for (int64_t d = 0; d < H; ++d) out[t * H + d] += g * so[t * H + d];
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine::cpu
