#include "engine/cpu/gated_deltanet.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/cpu/ops.h"

namespace tandem::engine::cpu {

absl::StatusOr<std::unique_ptr<GatedDeltaNet>> GatedDeltaNet::Create(DeltaNetWeights w, const DeltaNetLayout& D,
                                                                      int64_t hidden, float eps) {
  if (D.n_k <= 0 || D.n_v <= 0 || D.n_v % D.n_k != 0 || D.dk <= 0 || D.dv <= 0 || D.conv_kernel < 1) {
    return absl::InvalidArgumentError(absl::StrCat("gated deltanet: unsupported heads n_k=", D.n_k, " n_v=", D.n_v,
                                                   " dk=", D.dk, " dv=", D.dv, " conv kernel=", D.conv_kernel));
  }
  const std::vector<float>* got[] = {&w.in_qkv, &w.in_z, &w.in_b, &w.in_a, &w.conv,
                                      &w.A_log,  &w.dt_bias, &w.norm, &w.out};
  const auto want = kernels::DeltaNetWeightSizes(D, hidden);
  for (size_t i = 0; i < want.size(); ++i) {
    if (static_cast<int64_t>(got[i]->size()) != want[i].size) {
      return absl::InvalidArgumentError(absl::StrCat("gated deltanet weight ", want[i].name, " has ", got[i]->size(),
                                                     " values, want ", want[i].size));
    }
  }
  auto m = std::make_unique<GatedDeltaNet>();
  m->D_ = D;
  m->hidden_ = hidden;
  m->eps_ = eps;
  // One product for the four input projections: rows qkv | z | b | a.
  for (const std::vector<float>* p : {&w.in_qkv, &w.in_z, &w.in_b, &w.in_a}) {
    m->w_in_.insert(m->w_in_.end(), p->begin(), p->end());
  }
  w.in_qkv.clear(), w.in_z.clear(), w.in_b.clear(), w.in_a.clear();
  m->w_ = std::move(w);
  return m;
}

absl::StatusOr<std::unique_ptr<GatedDeltaNet>> GatedDeltaNet::Load(const Checkpoint& ckpt,
                                                                    const LinearAttentionWeightSpec& spec,
                                                                    const ModelConfig& cfg, const TpShard& shard) {
  const DeltaNetLayout D{shard.n_linear_k_heads, shard.n_linear_v_heads, cfg.linear_key_head_dim,
                        cfg.linear_value_head_dim, cfg.linear_conv_kernel_dim};
  DeltaNetWeights w;
  ASSIGN_OR_RETURN(w.in_qkv, ReadWeight(ckpt, spec.in_qkv));
  ASSIGN_OR_RETURN(w.in_z, ReadWeight(ckpt, spec.in_z));
  ASSIGN_OR_RETURN(w.in_b, ReadWeight(ckpt, spec.in_b));
  ASSIGN_OR_RETURN(w.in_a, ReadWeight(ckpt, spec.in_a));
  ASSIGN_OR_RETURN(w.conv, ReadWeight(ckpt, spec.conv));
  ASSIGN_OR_RETURN(w.A_log, ReadWeight(ckpt, spec.a_log));
  ASSIGN_OR_RETURN(w.dt_bias, ReadWeight(ckpt, spec.dt_bias));
  ASSIGN_OR_RETURN(w.norm, ReadWeight(ckpt, spec.norm));  // plain w (not zero-centred)
  ASSIGN_OR_RETURN(w.out, ReadWeight(ckpt, spec.out));
  return Create(std::move(w), D, cfg.hidden_size, static_cast<float>(cfg.rms_norm_eps));
}

void GatedDeltaNet::AllocateStates(int32_t slots) {
  conv_.assign(static_cast<size_t>(slots) * D_.conv_state_size(), 0.0f);
  S_.assign(static_cast<size_t>(slots) * D_.state_size(), 0.0f);
  next_pos_.assign(slots, -1);
}

void GatedDeltaNet::CopyState(int32_t src, int32_t dst) {
  const int64_t c = D_.conv_state_size(), n = D_.state_size();
  std::copy(conv_.begin() + src * c, conv_.begin() + (src + 1) * c, conv_.begin() + dst * c);
  std::copy(S_.begin() + src * n, S_.begin() + (src + 1) * n, S_.begin() + dst * n);
  next_pos_[dst] = next_pos_[src];
}

absl::Status GatedDeltaNet::Forward(StepContext& ctx, const float* x, float* out) {
  if (ctx.batch == nullptr) return absl::InternalError("gated deltanet needs the step's batch");
  const StepMeta& m = ctx.m;
  const int64_t T = ctx.num_tokens(), H = hidden_, C = D_.conv_dim(), V = D_.value_dim();
  const int64_t row = D_.proj_row();  // qkv | z | b | a
  std::vector<float> proj(T * row), o(T * V);
  matmul(ctx.pool, proj.data(), x, w_in_.data(), T, H, row);

  // Per token, in order (tokens of one sequence come in position order): the slot's state, the
  // conv and the gates. Then the recurrence, value heads on the threads, each head's tokens in
  // order; then the gated output norm.
  std::vector<float*> S(T);
  std::vector<float> g(T * D_.n_v), beta(T * D_.n_v);
  for (int64_t t = 0; t < T; ++t) {
    const SeqChunk& chunk = ctx.batch->seqs[ctx.meta[m.token_seq() + t]];
    const int64_t pos = ctx.meta[m.pos() + t];
    const int32_t slot = chunk.state_slot;
    if (slot < 0 || slot >= num_slots()) {
      return absl::FailedPreconditionError(absl::StrCat("gated deltanet: sequence ", chunk.seq_id, " has state slot ",
                                                        slot, " outside the pool of ", num_slots()));
    }
    float* conv = conv_.data() + slot * D_.conv_state_size();
    float* state = S_.data() + slot * D_.state_size();
    if (pos == 0) {
      std::fill(conv, conv + D_.conv_state_size(), 0.0f);
      std::fill(state, state + D_.state_size(), 0.0f);
    } else if (next_pos_[slot] != pos) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gated deltanet: sequence ", chunk.seq_id, " continues at position ", pos, " but state slot ", slot,
          next_pos_[slot] < 0 ? std::string(" is empty (no chunk at position 0)")
                              : absl::StrCat(" is at position ", next_pos_[slot])));
    }
    float* p = proj.data() + t * row;
    gated_deltanet_prepare(p, conv, g.data() + t * D_.n_v, beta.data() + t * D_.n_v, p + C + V, p + C + V + D_.n_v,
                           w_.conv.data(), w_.A_log.data(), w_.dt_bias.data(), D_);
    next_pos_[slot] = pos + 1;
    S[t] = state;
  }
  ParallelFor(T * D_.state_size() < (1 << 14) ? nullptr : ctx.pool, D_.n_v, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        gated_deltanet_head(o.data() + t * V + h * D_.dv, S[t], proj.data() + t * row, g.data() + t * D_.n_v,
                            beta.data() + t * D_.n_v, h, D_);
      }
    }
  });
  for (int64_t t = 0; t < T; ++t) {
    // Output norm per value head, gated by silu(z).
    gated_rmsnorm(o.data() + t * V, o.data() + t * V, w_.norm.data(), proj.data() + t * row + C, D_.n_v, D_.dv, eps_);
  }
  // out_proj is row-parallel: this rank's value heads give a partial sum.
  matmul(ctx.pool, out, o.data(), w_.out.data(), T, V, H);
  return absl::OkStatus();
}

}  // namespace tandem::engine::cpu
