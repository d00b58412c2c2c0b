#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tandem::kernels::ref {

namespace {
inline double KvValue(bf16_bits v) { return Bf16ToFloat(v); }
inline double KvValue(float v) { return v; }
}  // namespace

template <typename KV>
void Attend(float* out, const float* q, const KV* k_cache, const KV* v_cache, const int32_t* block_tables,
            const int32_t* token_seq, const int32_t* pos, int64_t T, const AttentionShape& A, float scale) {
  const int64_t hd = A.head_dim, group = A.n_heads / A.n_kv_heads, kv_dim = A.n_kv_heads * hd;
  std::vector<double> s;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * A.max_blocks;
    const int64_t n = pos[t] + 1;
    for (int64_t h = 0; h < A.n_heads; ++h) {
      const float* qh = q + t * A.q_stride + h * hd;
      const int64_t kvh = h / group;
      s.assign(n, 0.0);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t slot = static_cast<int64_t>(table[j / A.block_size]) * A.block_size + j % A.block_size;
        const KV* k = k_cache + slot * kv_dim + kvh * hd;
        double d = 0;
        for (int64_t i = 0; i < hd; ++i) d += static_cast<double>(qh[i]) * KvValue(k[i]);
        s[j] = d * scale;
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& v : s) sum += v = std::exp(v - mx);
      for (int64_t i = 0; i < hd; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t slot = static_cast<int64_t>(table[j / A.block_size]) * A.block_size + j % A.block_size;
          acc += s[j] * KvValue(v_cache[slot * kv_dim + kvh * hd + i]);
        }
        out[t * A.n_heads * hd + h * hd + i] = static_cast<float>(acc / sum);
      }
    }
  }
}

void paged_attention(float* out, const float* q, const bf16_bits* k_cache, const bf16_bits* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, float scale) {
  Attend(out, q, k_cache, v_cache, block_tables, token_seq, pos, T, A, scale);
}

void paged_attention(float* out, const float* q, const float* k_cache, const float* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, float scale) {
  Attend(out, q, k_cache, v_cache, block_tables, token_seq, pos, T, A, scale);
}

}  // namespace tandem::kernels::ref
