#include "kernels/gated_deltanet.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/linear_attention.h"

// The references: engine/cpu/linear_attention.h's templates in double, each sequence's tokens in
// order with its slot's states; and the chunked form of the recurrence, written out in double.
namespace tandem::kernels::ref {

void gated_deltanet_prepare(float* qkv, float* g, float* beta, float* conv_states, const float* proj,
                            const bf16_bits* conv_w, const bf16_bits* A_log, const bf16_bits* dt_bias,
                            DeltaNetStep st, DeltaNetLayout L) {
  const int64_t C = L.conv_dim(), V = L.value_dim(), row = L.proj_row();
  for (int64_t s = 0; s < st.S; ++s) {
    float* cs = conv_states + st.state_slots[s] * L.conv_state_size();
    for (int64_t t = st.seq_starts[s]; t < st.seq_starts[s + 1]; ++t) {
      if (st.pos[t] == 0) std::fill(cs, cs + L.conv_state_size(), 0.0f);
      const float* p = proj + t * row;
      std::copy(p, p + C, qkv + t * C);
      engine::cpu::gated_deltanet_prepare<double>(qkv + t * C, cs, g + t * L.n_v, beta + t * L.n_v, p + C + V,
                                                  p + C + V + L.n_v, conv_w, A_log, dt_bias, L);
    }
  }
}

void gated_deltanet_recurrent(float* o, float* states, const float* qkv, const float* g, const float* beta,
                              DeltaNetStep st, DeltaNetLayout L) {
  const int64_t C = L.conv_dim(), V = L.value_dim();
  for (int64_t s = 0; s < st.S; ++s) {
    float* S = states + st.state_slots[s] * L.state_size();
    for (int64_t t = st.seq_starts[s]; t < st.seq_starts[s + 1]; ++t) {
      if (st.pos[t] == 0) std::fill(S, S + L.state_size(), 0.0f);
      for (int64_t h = 0; h < L.n_v; ++h) {
        engine::cpu::gated_deltanet_head<double>(o + t * V + h * L.dv, S, qkv + t * C, g + t * L.n_v,
                                                 beta + t * L.n_v, h, L);
      }
    }
  }
}

// Within a chunk of n tokens from state S0, with G the cumulative sum of g over the chunk
// (G_i <= G_r for r <= i, so every exp below is at most 1):
//   W = (I - A)^-1 (beta v - beta exp(G) K S0), A_ir = -beta_i exp(G_i - G_r) k_i.k_r (r < i);
//   o_i = exp(G_i) S0^T q_i + sum_{r<=i} exp(G_i - G_r) (q_i.k_r) W_r;
//   S  = exp(G_n-1) S0 + sum_r exp(G_n-1 - G_r) k_r W_r^T.
// W's rows are the delta rule's updates beta (v - u) of each token, the sums unrolling the recurrence.
void gated_deltanet_chunked(float* o, float* states, const float* qkv, const float* g, const float* beta,
                            DeltaNetStep st, DeltaNetLayout L, int64_t chunk) {
  const int64_t C = L.conv_dim(), V = L.value_dim(), dk = L.dk, dv = L.dv;
  std::vector<double> S(dk * dv), G(chunk), Tm(chunk * chunk), W(chunk * dv);
  for (int64_t s = 0; s < st.S; ++s) {
    const int64_t t0 = st.seq_starts[s], t1 = st.seq_starts[s + 1];
    if (t0 == t1) continue;
    for (int64_t h = 0; h < L.n_v; ++h) {
      const int64_t kh = h / (L.n_v / L.n_k);
      float* Sf = states + st.state_slots[s] * L.state_size() + h * dk * dv;
      for (int64_t i = 0; i < dk * dv; ++i) S[i] = st.pos[t0] == 0 ? 0.0 : Sf[i];
      auto q = [&](int64_t t, int64_t a) -> double { return qkv[t * C + kh * dk + a]; };
      auto k = [&](int64_t t, int64_t a) -> double { return qkv[t * C + L.key_dim() + kh * dk + a]; };
      auto v = [&](int64_t t, int64_t j) -> double { return qkv[t * C + 2 * L.key_dim() + h * dv + j]; };
      auto kk = [&](int64_t t, int64_t r, bool query) {
        double acc = 0;
        for (int64_t a = 0; a < dk; ++a) acc += (query ? q(t, a) : k(t, a)) * k(r, a);
        return acc;
      };
      for (int64_t c0 = t0; c0 < t1; c0 += chunk) {
        const int64_t n = std::min(chunk, t1 - c0);
        double cum = 0;
        for (int64_t i = 0; i < n; ++i) G[i] = cum += g[(c0 + i) * L.n_v + h];
        auto b = [&](int64_t i) -> double { return beta[(c0 + i) * L.n_v + h]; };
        // Tm = (I - A)^-1 by forward substitution, row by row (unit lower triangular).
        for (int64_t i = 0; i < n; ++i) {
          std::vector<double> A_i(i);
          for (int64_t m = 0; m < i; ++m) A_i[m] = -b(i) * std::exp(G[i] - G[m]) * kk(c0 + i, c0 + m, false);
          for (int64_t r = 0; r < n; ++r) Tm[i * chunk + r] = r == i ? 1.0 : 0.0;
          for (int64_t r = 0; r < i; ++r) {
            double acc = 0;
            for (int64_t m = r; m < i; ++m) acc += A_i[m] * Tm[m * chunk + r];
            Tm[i * chunk + r] = acc;
          }
        }
        std::vector<double> rhs(n * dv);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < dv; ++j) {
            double ks = 0;
            for (int64_t a = 0; a < dk; ++a) ks += k(c0 + i, a) * S[a * dv + j];
            rhs[i * dv + j] = b(i) * (v(c0 + i, j) - std::exp(G[i]) * ks);
          }
        }
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < dv; ++j) {
            double acc = 0;
            for (int64_t r = 0; r <= i; ++r) acc += Tm[i * chunk + r] * rhs[r * dv + j];
            W[i * dv + j] = acc;
          }
        }
        for (int64_t i = 0; i < n; ++i) {
          std::vector<double> qk(i + 1);
          for (int64_t r = 0; r <= i; ++r) qk[r] = std::exp(G[i] - G[r]) * kk(c0 + i, c0 + r, true);
          for (int64_t j = 0; j < dv; ++j) {
            double acc = 0;
            for (int64_t a = 0; a < dk; ++a) acc += q(c0 + i, a) * S[a * dv + j];
            acc *= std::exp(G[i]);
            for (int64_t r = 0; r <= i; ++r) acc += qk[r] * W[r * dv + j];
            o[(c0 + i) * V + h * dv + j] = static_cast<float>(acc);
          }
        }
        std::vector<double> kdecay(n);
        for (int64_t r = 0; r < n; ++r) kdecay[r] = std::exp(G[n - 1] - G[r]);
        for (int64_t a = 0; a < dk; ++a) {
          for (int64_t j = 0; j < dv; ++j) {
            double acc = std::exp(G[n - 1]) * S[a * dv + j];
            for (int64_t r = 0; r < n; ++r) acc += kdecay[r] * k(c0 + r, a) * W[r * dv + j];
            S[a * dv + j] = acc;
          }
        }
      }
      for (int64_t i = 0; i < dk * dv; ++i) Sf[i] = static_cast<float>(S[i]);
    }
  }
}

void gated_deltanet_norm(float* out, const float* o, const bf16_bits* w, const float* z, int64_t z_stride,
                         int64_t T, DeltaNetLayout L, float eps) {
  const int64_t V = L.value_dim();
  for (int64_t t = 0; t < T; ++t) {
    engine::cpu::gated_rmsnorm<double>(out + t * V, o + t * V, w, z + t * z_stride, L.n_v, L.dv, eps);
  }
}

}  // namespace tandem::kernels::ref
