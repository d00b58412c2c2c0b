// The paged-attention steps the attention kernels' GPU tests share (attention_prefill_cuda_test,
// attention_decode_cuda_test): a step's sequences over shuffled KV blocks with NaN wherever no
// sequence may read, the CPU reference (ref::paged_attention, double accumulation) run on the
// host's cores, and the worst (token, head) row's relative error.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>
#include <vector>

#include "kernels/attention.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels::testing::attention {

struct Seq {
  int32_t prefix;  // positions already cached before the chunk
  int32_t chunk;   // the step's tokens of this sequence
};

struct Case {
  int64_t nh, nkv, hd, bs;
  std::vector<Seq> seqs;
};

// A step's metadata over shuffled blocks: the tables (entries past a sequence's blocks name a
// block far outside the cache), each token's sequence and position, the sequences' first tokens,
// and the cache slots no sequence may read (past each sequence's last position, and whole blocks
// no sequence uses), which the caller fills with NaN.
struct Step {
  AttentionShape A;
  int64_t T = 0, S = 0, num_blocks = 0;
  std::vector<int32_t> tables, token_seq, pos, seq_starts;
  std::vector<int64_t> unused_slots;
};

inline Step MakeStep(const Case& c) {
  Step st;
  AttentionShape& A = st.A;
  A.n_heads = c.nh, A.n_kv_heads = c.nkv, A.head_dim = c.hd, A.block_size = c.bs;
  A.q_stride = c.nh * c.hd + 2 * c.nkv * c.hd;  // q rows inside the fused qkv buffer
  st.S = static_cast<int64_t>(c.seqs.size());
  for (const Seq& s : c.seqs) A.max_blocks = std::max<int64_t>(A.max_blocks, (s.prefix + s.chunk + c.bs - 1) / c.bs);
  st.num_blocks = st.S * A.max_blocks + 3;
  std::vector<int32_t> perm(st.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), Rng());
  constexpr int32_t kFarBlock = 1 << 28;  // past the cache: reading through it faults
  st.tables.assign(st.S * A.max_blocks, kFarBlock);
  int64_t next_block = 0;
  for (int64_t s = 0; s < st.S; ++s) {
    const int64_t n = c.seqs[s].prefix + c.seqs[s].chunk, used = (n + c.bs - 1) / c.bs;
    for (int64_t b = 0; b < used; ++b) st.tables[s * A.max_blocks + b] = perm[next_block++];
    const int64_t last_block = st.tables[s * A.max_blocks + used - 1];
    for (int64_t p = n; p < used * c.bs; ++p) st.unused_slots.push_back(last_block * c.bs + p % c.bs);
    st.seq_starts.push_back(static_cast<int32_t>(st.token_seq.size()));
    for (int32_t i = 0; i < c.seqs[s].chunk; ++i) {
      st.token_seq.push_back(static_cast<int32_t>(s));
      st.pos.push_back(c.seqs[s].prefix + i);
    }
  }
  st.T = static_cast<int64_t>(st.pos.size());
  st.seq_starts.push_back(static_cast<int32_t>(st.T));
  for (int64_t b = next_block; b < st.num_blocks; ++b) {
    for (int64_t o = 0; o < c.bs; ++o) st.unused_slots.push_back(perm[b] * c.bs + o);
  }
  return st;
}

// NaN in every slot of `cache` that no sequence of `st` may read.
template <typename KV>
void PoisonUnused(std::vector<KV>& cache, const Step& st, KV nan) {
  const int64_t kv_dim = st.A.n_kv_heads * st.A.head_dim;
  for (const int64_t slot : st.unused_slots) std::fill_n(cache.begin() + slot * kv_dim, kv_dim, nan);
}

// The reference over tokens split across the host's cores (it is single-threaded, and a 2100-token
// step at 32 heads is ~10^10 multiply-adds in double).
template <typename KV>
std::vector<float> Reference(const std::vector<float>& q, const std::vector<KV>& kc, const std::vector<KV>& vc,
                             const std::vector<int32_t>& tables, const std::vector<int32_t>& token_seq,
                             const std::vector<int32_t>& pos, const AttentionShape& A, float scale, KvScale kv_scale) {
  const int64_t T = static_cast<int64_t>(pos.size()), row = A.n_heads * A.head_dim, piece = 8;
  std::vector<float> out(T * row);
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t t0; (t0 = next.fetch_add(piece)) < T;) {
      const int64_t n = std::min(piece, T - t0);
      ref::paged_attention(out.data() + t0 * row, q.data() + t0 * A.q_stride, kc.data(), vc.data(), tables.data(),
                           token_seq.data() + t0, pos.data() + t0, n, A, scale, kv_scale);
    }
  };
  std::vector<std::thread> threads(std::max(1u, std::thread::hardware_concurrency()));
  for (auto& th : threads) th = std::thread(work);
  for (auto& th : threads) th.join();
  return out;
}

// The worst relative error of one (token, head) row of head_dim values.
inline double WorstRow(const std::vector<float>& got, const std::vector<float>& want, int64_t hd) {
  double worst = 0;
  for (size_t r = 0; r * hd < want.size(); ++r) {
    double num = 0, den = 0;
    for (int64_t d = 0; d < hd; ++d) {
      const double g = got[r * hd + d], w = want[r * hd + d];
      if (!std::isfinite(g)) return INFINITY;
      num += (g - w) * (g - w);
      den += w * w;
    }
    worst = std::max(worst, std::sqrt(num / std::max(den, 1e-30)));
  }
  return worst;
}

}  // namespace tandem::kernels::testing::attention
