#include "kernels/attention_decode.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include <cooperative_groups.h>

#include "kernels/attention_tile.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

using namespace tile;  // NOLINT: the tensor-core pieces shared with attention_prefill.cu

// The block's shape: 4 warps, each taking 16 of a tile's 64 positions for the group's rows (one m16
// tile); two K/V buffers of 64 x (HD + 8) bf16 each (69,632 bytes at head_dim 128, within the GB10's
// 99 KB a block). After the walk the same shared memory holds the 4 warps' partial outputs.
template <int HD>
struct DecodeTile {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBN = 64;  // KV positions per tile: 16 per warp
  static constexpr int kRows = 16;
  using Stager = KvTileStager<HD, bf16_bits, kThreads, kBN>;  // for the layout only
  static constexpr int kLd = Stager::kLd;
  static constexpr int kTileElems = Stager::kTileElems;
  static constexpr int kSmemBytes = 4 * kTileElems * 2;
  static_assert(kBN == 16 * kWarps, "one 16-position slice of every tile per warp");
  static_assert((kWarps * kRows * HD + 2 * kWarps * kRows) * 4 <= kSmemBytes, "the warps' partials fit");
  static_assert(kSmemBytes <= 99 * 1024, "the GB10 (sm_121) gives a block at most 99 KB");
  // With a cluster merge the block's combined partial of the group (up to 16 rows of [O (HD)], then
  // max and sum per row) follows the warps' partials.
  static constexpr int kClusterPartOffset = (kWarps * kRows * HD + 2 * kWarps * kRows) * 4;
  static_assert(kClusterPartOffset + (kRows * HD + 2 * kRows) * 4 <= kSmemBytes, "the cluster partial fits");
};

// How a sequence of n_pos positions is cut: `per` tiles a partition, `active` partitions that hold
// at least one tile (the others exit at once and are not counted). The same in every block of a
// (sequence, kv head), since it depends only on n_pos and parts.
struct Cut {
  int per, active;
};
__host__ __device__ __forceinline__ Cut CutTiles(int n_tiles, int parts) {
  const int used = min(parts, n_tiles);
  const int per = (n_tiles + used - 1) / used;
  return {per, (n_tiles + per - 1) / per};
}

// The cluster merge: the `parts` partition blocks of one (sequence, kv head) run as one thread block
// cluster, and each has left its partition's combined partial in its own shared memory (`part`: O
// of kRows rows of HD, then the rows' maxima and sums). After a cluster barrier the blocks split
// the group's G x HD outputs (float4s, block p from p * kThreads on) and read every active
// partition's partial through distributed shared memory, in partition order; a second barrier
// keeps each block's shared memory alive until the others have read it. Against the global merge
// (partials through L2, a device-wide fence, a counter and one block reading them all) this is two
// cluster barriers and one round of shared-memory loads.
constexpr int kMaxClusterParts = 16;

// The deep walk (attention_decode_buffers): NB > 2 buffers of K/V tiles and the slots of every tile
// of the partition (at most kMaxDeepTiles) looked up before the wait; the first NB tiles in flight at
// once, a buffer refilled with tile i + NB once tile i is done. Hopper-sized shared memory (NB x 34
// KB at head_dim 128); bf16 caches only. The launcher takes NB = 3: on the H100 at 4k 3 buffers beat
// 4 and 5 (whose larger blocks leave less of the SM to the kernels beside them), session 57 in
// docs/bench/decode-h200.md.
constexpr int kMaxDeepTiles = 16;

template <int HD>
__device__ __forceinline__ void ClusterMerge(float* out, unsigned char* part_raw, int s, int kvh, int G,
                                             int64_t n_heads, int p, int parts, int active, bool idle,
                                             float v_scale) {
  constexpr int kRows = DecodeTile<HD>::kRows, kThreads = DecodeTile<HD>::kThreads;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const float* part = reinterpret_cast<const float*>(part_raw);
  cluster.sync();  // every active partition's partial is in place
  if (idle) GridDepWait();  // a walking block waited before its loads; an idle one before writing `out`
  for (int idx = p * kThreads + static_cast<int>(threadIdx.x); idx < G * HD / 4; idx += parts * kThreads) {
    const int r = idx / (HD / 4), d = (idx % (HD / 4)) * 4;
    float m[kMaxClusterParts], l[kMaxClusterParts];
    float M = -INFINITY;
#pragma unroll
    for (int q = 0; q < kMaxClusterParts; ++q) {
      m[q] = -INFINITY, l[q] = 0.0f;
      if (q < active) {
        const float* remote = cluster.map_shared_rank(part, q);
        m[q] = remote[kRows * HD + r];
        l[q] = remote[kRows * HD + kRows + r];
      }
      M = fmaxf(M, m[q]);
    }
    float L = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int q = 0; q < kMaxClusterParts; ++q) {
      if (q < active) {
        const float wt = Exp2(m[q] - M);
        const float4 v = *reinterpret_cast<const float4*>(cluster.map_shared_rank(part, q) + r * HD + d);
        L += l[q] * wt;
        acc.x += v.x * wt, acc.y += v.y * wt, acc.z += v.z * wt, acc.w += v.w * wt;
      }
    }
    const float f = v_scale / L;
    *reinterpret_cast<float4*>(out + (static_cast<int64_t>(s) * n_heads + static_cast<int64_t>(kvh) * G + r) * HD +
                               d) = make_float4(acc.x * f, acc.y * f, acc.z * f, acc.w * f);
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
}

// Grid: S * n_kv_heads * parts blocks, block b = ((s * n_kv_heads) + kvh) * parts + p. Row r < G of
// the block's m16 tile is q head kvh * G + r of token s. Scratch per (s, kvh): parts x G rows of
// [max, sum, O (HD)], the max in base 2 (q_scale holds log2 e).
template <int HD, typename KV, bool kCluster, int NB = 2>
__global__ void __launch_bounds__(DecodeTile<HD>::kThreads)
    AttentionDecodeKernel(float* out, float* scratch, uint32_t* counters, const float* q, const KV* kc, const KV* vc,
                          const int32_t* block_tables, const int32_t* pos, AttentionShape A, int parts, float q_scale,
                          float v_scale) {
  using C = DecodeTile<HD>;
  using Stager = KvTileStager<HD, KV, C::kThreads, C::kBN>;
  constexpr int kBN = C::kBN, kLd = C::kLd, kRows = C::kRows, kWarps = C::kWarps, kThreads = C::kThreads;
  static_assert(Stager::kLd == kLd && Stager::kTileElems == C::kTileElems, "one shared-memory layout");
  constexpr bool kDeep = NB > 2;
  static_assert(!kDeep || Stager::kAsync, "the deep walk stages bf16 tiles by cp.async");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);

  // The next kernel (o_proj) may launch once every block has let it: a walking block does so after
  // its wait, below, not at its start. o_proj's blocks load their weights before their own wait (16.8
  // MB in bf16). Launched at attention's start, those loads were in flight while the q/k norm and
  // attention waited for their own post-wait loads, the step's critical path. Same-run A/B on one
  // H100, session 50, batch 1: -2.5% bf16, -2.4% FP8, -2.8% NVFP4 at 1k; -0.7%, +0.5%, -0.3% at 4k;
  // batch 8 -0.2% to -0.6% (docs/bench/decode-h200.md).
  const int n_kv_heads = static_cast<int>(A.n_kv_heads), G = static_cast<int>(A.n_heads / A.n_kv_heads);
  const int b = static_cast<int>(blockIdx.x), p = b % parts, kvh = (b / parts) % n_kv_heads,
            s = b / parts / n_kv_heads;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  // pos and the block tables are the step's metadata (copied before the launch), and in a decode
  // step every cache position before the token's own was stored by an earlier step: they are read
  // before the wait. Only q and the token's own K/V come from the kernels before.
  const int n_pos = pos[s] + 1, n_tiles = (n_pos + kBN - 1) / kBN;
  const Cut cut = CutTiles(n_tiles, parts);
  // A partition past the sequence's last tile holds no position. With the global merge it exits at
  // once (it is not counted); with the cluster merge it skips only the walk, since the cluster's
  // barriers count every block, and helps merge.
  const bool idle = p >= cut.active;
  if (idle && !kCluster) return;
  if (idle) GridDepLaunchDependents();  // nothing to fetch: it only helps merge
  // The (sequence, kv head)'s partials in scratch (the global merge's).
  const auto partials = [&] { return scratch + (static_cast<int64_t>(s) * n_kv_heads + kvh) * parts * G * (HD + 2); };
  if (!kCluster || !idle) {
    const int kt_begin = p * cut.per, kt_end = min(n_tiles, kt_begin + cut.per);

    __shared__ int32_t sm_slot[kDeep ? kMaxDeepTiles : 2][64];
    Stager kv(smem, sm_slot, block_tables + static_cast<int64_t>(s) * A.max_blocks, kc, vc, A.block_size, n_pos,
              A.n_kv_heads * HD, kvh);
    const int n_t = kt_end - kt_begin;
    bool early1 = false;
    int fetched = 0;  // the deep walk: tiles of the partition fetched so far (the same in every thread)
    if constexpr (kDeep) {
      // Every tile's slots (n_t <= kMaxDeepTiles, the launcher's bound), loaded before any is stored.
      constexpr int kRounds = kMaxDeepTiles * kBN / kThreads;
      int32_t sl[kRounds];
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const int i = r * kThreads + tid;
        sl[r] = i < n_t * kBN ? kv.slot_of(kt_begin * kBN + i) : -1;
      }
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const int i = r * kThreads + tid;
        if (i < n_t * kBN) sm_slot[i / kBN][i % kBN] = sl[r];
      }
      __syncthreads();
      const int first = min(n_t, NB);
      while (fetched < first && (kt_begin + fetched + 1) * kBN < n_pos) {
        kv.fetch(fetched, fetched);
        ++fetched;
      }
      GridDepWait();
      GridDepLaunchDependents();
      while (fetched < first) {
        kv.fetch(fetched, fetched);
        ++fetched;
      }
    } else {
      // A tile that ends before the token's own position was stored by earlier steps: the partition's
      // first tile, where it is such, is fetched before the wait, and with a bf16 cache (cp.async into
      // the second buffer) its second tile too, so that a short partition has all of its K/V in flight
      // when the previous kernel ends. fp8, whose loads go through registers (held until put into
      // shared memory), fetches only the first.
      const bool two = kt_begin + 1 < kt_end;
      const bool early0 = (kt_begin + 1) * kBN < n_pos;
      early1 = Stager::kAsync && two && (kt_begin + 2) * kBN < n_pos;
      kv.load_slots_pair(kt_begin * kBN);
      __syncthreads();
      if (early0) kv.fetch(0);
      if (early1) kv.fetch(1);
      GridDepWait();
      GridDepLaunchDependents();
      if (!early0) kv.fetch(0);
      kv.put_held(0);  // fp8: tile 0 from its held registers into shared memory (bf16: nothing)
    }
    // ---- Q: the group's rows scaled (softmax scale, k scale, log2 e) and rounded to bf16 straight
    // into each warp's A fragments (m16n8k16: this lane's rows g and g + 8, columns c2, c2 + 1 and 8
    // more), rows G..15 zero: not staged in shared memory, whose second buffer may already be taking
    // a tile.
    const int g = lane / 4, c2 = (lane % 4) * 2;
    uint32_t qf[HD / 16][4];
    {
      const float* qrow = q + static_cast<int64_t>(s) * A.q_stride + static_cast<int64_t>(kvh) * G * HD;
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int r = g + 8 * (j & 1), c = kk * 16 + c2 + 8 * (j >> 1);
          const float2 v = r < G ? *reinterpret_cast<const float2*>(qrow + r * HD + c) : make_float2(0.0f, 0.0f);
          qf[kk][j] = PackFloatsBf16(v.x * q_scale, v.y * q_scale);
        }
      }
    }
    if constexpr (!Stager::kAsync) __syncthreads();  // tile 0, put by every thread, is visible

    float o[HD / 8][4];
#pragma unroll
    for (int nb = 0; nb < HD / 8; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
    // ldmatrix lane offsets into this warp's 16 positions: K (non-transposed) gives the B fragments of
    // two 8-position column blocks, V (transposed) of two 8-dim column blocks (mma.m16n8k16 layouts).
    const int k_lane = (warp * 16 + (lane / 16) * 8 + lane % 8) * kLd + ((lane / 8) % 2) * 8;
    const int v_lane = (warp * 16 + ((lane / 8) % 2) * 8 + lane % 8) * kLd + (lane / 16) * 8;

    for (int kt = kt_begin; kt < kt_end; ++kt) {
      const int cur = kDeep ? (kt - kt_begin) % NB : (kt - kt_begin) & 1, kv0 = kt * kBN;
      const bool more = kt + 1 < kt_end;
      if constexpr (kDeep) {
        CpAsyncWaitAtMost<NB - 1>(fetched - (kt - kt_begin) - 1);  // tile kt and those before it landed
        __syncthreads();
      }
      // The slots of tile kt + 2: with a bf16 cache looked up now and stored after this tile's
      // products (slots[cur] then has no more readers), so the lookup's round trip is not waited for
      // here; fp8 stores them at once (the register held across the products took its head_dim 128
      // kernel from 168 to 195 registers).
      int32_t next_slot = -1;
      if (!kDeep && more) {
        // Tile kt + 1, unless it was fetched before the wait; its buffer's last readers passed the
        // barrier ending kt - 1.
        if constexpr (!Stager::kFetchLate) {
          if (kt != kt_begin || !early1) kv.fetch(cur ^ 1);
        }
        if (kt + 2 < kt_end) {
          if constexpr (Stager::kAsync) {
            if (tid < kBN) next_slot = kv.slot_of(kv0 + 2 * kBN + tid);
          } else {
            kv.load_slots(cur, kv0 + 2 * kBN);
          }
        }
      }
      if constexpr (Stager::kAsync && !kDeep) {
        Stager::wait_copies(more);
        __syncthreads();
      }
      const __nv_bfloat16* ks = kv.k_tile(cur);
      const __nv_bfloat16* vs = kv.v_tile(cur);

      // S = Q K^T over this warp's 16 positions kv0 + 16 warp .. + 15.
      float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        uint32_t bk[4];
        LdMatrixX4(bk, SmemAddr(ks + kk * 16 + k_lane));
        Mma(sc[0], qf[kk], bk[0], bk[1]);
        Mma(sc[1], qf[kk], bk[2], bk[3]);
      }
      if (kv0 + kBN > n_pos) {  // the sequence's last tile: positions past the token's own are masked
#pragma unroll
        for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (kv0 + warp * 16 + nb * 8 + c2 + (e & 1) >= n_pos) sc[nb][e] = -INFINITY;
          }
        }
      }
      // Online softmax per row (kernels/attention_tile.cuh). A warp may see only masked positions
      // (all 16 past the token in the partition's only tile): its rows keep the maximum -inf and
      // weights 0.
      OnlineSoftmaxTile<true>(sc, m_run, l_run, o);
      // O += P V over the same 16 positions: the scores' accumulator layout is the A fragment layout.
      const uint32_t pa[4] = {PackFloatsBf16(sc[0][0], sc[0][1]), PackFloatsBf16(sc[0][2], sc[0][3]),
                              PackFloatsBf16(sc[1][0], sc[1][1]), PackFloatsBf16(sc[1][2], sc[1][3])};
#pragma unroll
      for (int dp = 0; dp < HD / 16; ++dp) {
        uint32_t bv[4];
        LdMatrixX4Trans(bv, SmemAddr(vs + dp * 16 + v_lane));
        Mma(o[2 * dp], pa, bv[0], bv[1]);
        Mma(o[2 * dp + 1], pa, bv[2], bv[3]);
      }
      if constexpr (kDeep) {
        __syncthreads();  // this buffer's readers are done: refilled with tile kt + NB, or the partials
        if (fetched < n_t) {
          kv.fetch(cur, fetched);
          ++fetched;
        }
      } else {
        if (more) {
          if constexpr (Stager::kFetchLate) {
            kv.fetch(cur ^ 1);
          } else {
            kv.put_held(cur ^ 1);
          }
          if (Stager::kAsync && kt + 2 < kt_end && tid < kBN) kv.slots[cur][tid] = next_slot;
        }
        __syncthreads();  // this buffer's readers are done: the next iteration fetches into it
      }
    }

    // ---- The 4 warps' partials into shared memory (the tiles are done: the last barrier above), rows
    // of the group only: red_o [warp][row][HD], red_m / red_l [warp][row].
    float* red_o = reinterpret_cast<float*>(smem_raw);
    float* red_m = red_o + kWarps * kRows * HD;
    float* red_l = red_m + kWarps * kRows;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_run[half];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int r = g + 8 * half;
      if (r >= G) continue;
      float* dst = red_o + (warp * kRows + r) * HD + c2;
#pragma unroll
      for (int nb = 0; nb < HD / 8; ++nb) {
        *reinterpret_cast<float2*>(dst + nb * 8) = make_float2(o[nb][2 * half], o[nb][2 * half + 1]);
      }
      if (lane % 4 == 0) red_m[warp * kRows + r] = m_run[half], red_l[warp * kRows + r] = l;
    }
    __syncthreads();

    // Combined per (row, dim): the block's (max, sum, O) of its partition. At least one position of
    // the partition is unmasked, so the maximum over the warps is finite.
    for (int idx = tid; idx < G * HD; idx += kThreads) {
      const int r = idx / HD, d = idx % HD;
      float M = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) M = fmaxf(M, red_m[w * kRows + r]);
      float L = 0.0f, acc = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float wt = Exp2(red_m[w * kRows + r] - M);
        L += red_l[w * kRows + r] * wt;
        acc += red_o[(w * kRows + r) * HD + d] * wt;
      }
      if constexpr (kCluster) {  // [O (kRows x HD)], max (kRows), sum (kRows) in this block's shared memory
        float* part = reinterpret_cast<float*>(smem_raw + C::kClusterPartOffset);
        part[r * HD + d] = acc;
        if (d == 0) part[kRows * HD + r] = M, part[kRows * HD + kRows + r] = L;
      } else if (cut.active == 1) {
        out[(static_cast<int64_t>(s) * A.n_heads + static_cast<int64_t>(kvh) * G + r) * HD + d] = acc / L * v_scale;
      } else {
        float* part = partials() + (static_cast<int64_t>(p) * G + r) * (HD + 2);
        if (d == 0) part[0] = M, part[1] = L;
        part[2 + d] = acc;
      }
    }
  }
  if constexpr (kCluster) {
    ClusterMerge<HD>(out, smem_raw + C::kClusterPartOffset, s, kvh, G, A.n_heads, p, parts, cut.active, idle,
                     v_scale);
    return;
  }
  if (cut.active == 1) return;

  const int64_t sk = static_cast<int64_t>(s) * n_kv_heads + kvh;
  const float* part_base = partials();
  // ---- The last partition block of (s, kvh) to finish merges every partition (the "last block"
  // pattern: each counts itself once its partial is visible device-wide).
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    uint32_t* counter = counters + sk;
    last = atomicAdd(counter, 1u) == static_cast<uint32_t>(cut.active - 1);
    if (last) *counter = 0;  // every partition has counted: ready for the next launch and graph replay
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Each row's maximum over the partitions, its weights 2^(m_p - M) and sum L in shared memory (the
  // warps' partials are done with it): a warp per row, lanes over the partitions, the sum a fixed
  // tree. Then each thread adds whole float4s of O over the partitions in order, kMergeLoads loads in
  // flight at a time: the merge of up to 64 partitions was a serial chain of loads per output.
  constexpr int kMergeLoads = 8;
  float* wts = reinterpret_cast<float*>(smem_raw);  // [active][G], then L[G]
  float* Ls = wts + cut.active * G;
  for (int r = warp; r < G; r += kWarps) {
    float mx = -INFINITY;
    for (int pp = lane; pp < cut.active; pp += 32) {
      mx = fmaxf(mx, __ldcg(part_base + (static_cast<int64_t>(pp) * G + r) * (HD + 2)));
    }
    mx = WarpMax(mx);
    float lsum = 0.0f;
    for (int pp = lane; pp < cut.active; pp += 32) {
      const float* part = part_base + (static_cast<int64_t>(pp) * G + r) * (HD + 2);
      const float wt = Exp2(__ldcg(part) - mx);
      wts[pp * G + r] = wt;
      lsum += __ldcg(part + 1) * wt;
    }
    lsum = WarpSum(lsum);
    if (lane == 0) Ls[r] = lsum;
  }
  __syncthreads();
  for (int idx = tid; idx < G * HD / 4; idx += kThreads) {
    const int r = idx / (HD / 4), d = (idx % (HD / 4)) * 4;
    const float* col = part_base + static_cast<int64_t>(r) * (HD + 2) + 2 + d;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int p0 = 0; p0 < cut.active; p0 += kMergeLoads) {
      float4 v[kMergeLoads];
#pragma unroll
      for (int u = 0; u < kMergeLoads; ++u) {
        if (p0 + u < cut.active) {
          const float* src = col + static_cast<int64_t>(p0 + u) * G * (HD + 2);
          v[u] = make_float4(__ldcg(src), __ldcg(src + 1), __ldcg(src + 2), __ldcg(src + 3));
        }
      }
#pragma unroll
      for (int u = 0; u < kMergeLoads; ++u) {
        if (p0 + u < cut.active) {
          const float wt = wts[(p0 + u) * G + r];
          acc.x += v[u].x * wt, acc.y += v[u].y * wt, acc.z += v[u].z * wt, acc.w += v[u].w * wt;
        }
      }
    }
    const float f = v_scale / Ls[r];
    float* dst = out + (static_cast<int64_t>(s) * A.n_heads + static_cast<int64_t>(kvh) * G + r) * HD + d;
    dst[0] = acc.x * f, dst[1] = acc.y * f, dst[2] = acc.z * f, dst[3] = acc.w * f;
  }
}

// The largest cluster (up to kMaxClusterParts) of `kernel`'s blocks with `smem` bytes of dynamic
// shared memory each that the device places, non-portable sizes allowed.
template <class Kernel>
int MaxClusterOf(Kernel kernel, int threads, int smem) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kMaxClusterParts);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  int size = 0;
  CUDA_CHECK(cudaOccupancyMaxPotentialClusterSize(&size, kernel, &config));
  return std::min(size, kMaxClusterParts);
}

// The most partitions a cluster merge takes: the largest cluster of the biggest decode block (head
// dim 128) the device can place, up to kMaxClusterParts (16 on the H200, a non-portable size; 8 is
// portable), asked once per process; 0 where clusters are not available.
int ClusterPartsLimit() {
  static const int n = [] {
    int device = 0, has_clusters = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&has_clusters, cudaDevAttrClusterLaunch, device));
    if (has_clusters == 0) return 0;
    using C = DecodeTile<128>;
    const int size = MaxClusterOf(AttentionDecodeKernel<128, __nv_bfloat16, true>, C::kThreads, C::kSmemBytes);
    return size >= 2 ? size : 0;
  }();
  return n;
}

// The 64-position tiles (DecodeTile's kBN, the same at every head_dim) that max_positions spans.
int64_t TilesAt(int64_t max_positions) {
  constexpr int64_t kBN = DecodeTile<128>::kBN;
  return (std::max<int64_t>(max_positions, 1) + kBN - 1) / kBN;
}

// How a decode launch splits each (sequence, kv head): `parts` partitions, merged in a cluster or
// through global memory. Partitions: as many as put about two blocks on every SM in one wave (the
// SM count from the device), at most one per 64-position tile of max_positions. Where that is more
// than a cluster holds (few sequences), the partitions are cut to the cluster's size and merged in
// it: the global merge's one block reading many partitions costs more than the partitions gain.
// Otherwise the global merge: with the same partitions the cluster version measured slower (its
// blocks wait for each other at the barriers and are placed together).
struct DecodeSplit {
  int64_t parts;
  bool cluster;
};
DecodeSplit Split(int64_t S, const AttentionShape& A, int64_t max_positions) {
  const int64_t tiles = TilesAt(max_positions);
  const int64_t blocks = std::max<int64_t>(S * A.n_kv_heads, 1);
  const int64_t want = (2 * SmCount() + blocks - 1) / blocks;
  const int64_t parts = std::clamp<int64_t>(want, 1, tiles), limit = ClusterPartsLimit();
  if (limit > 1 && parts > limit) return {limit, true};
  return {parts, false};
}

template <int HD>
constexpr int DeepSmemBytes(int nb) {
  return nb * 2 * DecodeTile<HD>::kTileElems * 2;
}

// The largest cluster the deep kernel of NB buffers may be placed in (0: none, e.g. the GB10, whose
// 99 KB a block hold two buffers), asked once.
template <int HD, int NB>
int DeepClusterLimit() {
  static const int n = DeepSmemBytes<HD>(NB) > MaxSmemPerBlock() - 8 * 1024
                           ? 0
                           : MaxClusterOf(AttentionDecodeKernel<HD, __nv_bfloat16, true, NB>,
                                          DecodeTile<HD>::kThreads, DeepSmemBytes<HD>(NB));
  return n;
}

// The buffers a launch takes (attention_decode_buffers): the deep walk for a cluster-merged launch
// over a bf16 cache whose partitions hold more than 2 tiles and at most kMaxDeepTiles at
// max_positions, with every block resident at once (at most one an SM: S * n_kv_heads * parts <=
// SMs) and max_buffers allows it: 3 buffers, or 2 where the device cannot place the cluster of
// 3-buffer blocks (the GB10).
template <int HD>
int BuffersFor(int64_t S, const AttentionShape& A, int64_t max_positions, bool bf16_cache, int max_buffers) {
  if (max_buffers <= 2 || !bf16_cache) return 2;
  const DecodeSplit split = Split(S, A, max_positions);
  static_assert(DecodeTile<HD>::kBN == DecodeTile<128>::kBN, "TilesAt's tiles");
  const int64_t tiles = TilesAt(max_positions);
  const int64_t per = (tiles + split.parts - 1) / split.parts;
  if (!split.cluster || per <= 2 || per > kMaxDeepTiles || S * A.n_kv_heads * split.parts > SmCount()) return 2;
  static_assert(kMaxDecodeBuffers == 3, "one deep kernel: 3 buffers (4 and 5 lost their A/B)");
  return DeepClusterLimit<HD, kMaxDecodeBuffers>() >= split.parts ? kMaxDecodeBuffers : 2;
}

template <int HD, typename KV>
void LaunchHd(float* out, float* scratch, uint32_t* counters, const float* q, const KV* k_cache, const KV* v_cache,
              const int32_t* block_tables, const int32_t* pos, int64_t S, const AttentionShape& A, DecodeSplit split,
              int buffers, float q_scale, float v_scale, cudaStream_t stream) {
  using C = DecodeTile<HD>;
  const int64_t parts = split.parts, blocks = S * A.n_kv_heads * parts;
  KERNEL_REQUIRE(blocks <= INT32_MAX);
  const auto launch = [&](auto kernel, unsigned cluster, int smem = C::kSmemBytes) {
    // Above 48 KB a block's dynamic shared memory must be allowed per kernel (and per device: set on
    // every launch, a driver call, not a sync); so must clusters of more than 8 blocks.
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (cluster > 8) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    LaunchClusters(kernel, dim3(static_cast<unsigned>(blocks)), dim3(C::kThreads), smem, stream,
                   dim3(cluster, 1, 1), out, scratch, counters, q, k_cache, v_cache, block_tables, pos, A,
                   static_cast<int>(parts), q_scale, v_scale);
  };
  if constexpr (sizeof(KV) == 2) {
    if (buffers > 2) {  // the deep walk (BuffersFor: a cluster-merged launch the device places)
      launch(AttentionDecodeKernel<HD, KV, true, kMaxDecodeBuffers>, static_cast<unsigned>(parts),
             DeepSmemBytes<HD>(kMaxDecodeBuffers));
      KERNEL_CHECK();
      return;
    }
  }
  if (split.cluster) {
    KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(out) % 16 == 0);
    launch(AttentionDecodeKernel<HD, KV, true>, static_cast<unsigned>(parts));
  } else {
    launch(AttentionDecodeKernel<HD, KV, false>, 1u);
  }
  KERNEL_CHECK();
}

template <typename KV>
void LaunchDecode(float* out, float* scratch, uint32_t* counters, const float* q, const KV* k_cache,
                  const KV* v_cache, const int32_t* block_tables, const int32_t* pos, int64_t S,
                  const AttentionShape& A, int64_t max_positions, float scale, KvScale kv_scale,
                  cudaStream_t stream, int max_buffers) {
  KERNEL_REQUIRE(attention_decode_supported(A));
  KERNEL_REQUIRE(max_buffers >= 2 && max_buffers <= kMaxDecodeBuffers);
  if (S == 0) return;
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(q) % 16 == 0 && S <= INT32_MAX && max_positions >= 1);
  const DecodeSplit split = Split(S, A, max_positions);
  KERNEL_REQUIRE(split.parts == 1 || split.cluster || (scratch != nullptr && counters != nullptr));
  // The scores are kept in base 2 (ex2 is the hardware's exponential): log2 e joins the scale.
  const float q_scale = scale * kv_scale.k * kLog2e;
  const auto launch = [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    const int buffers = BuffersFor<HD>(S, A, max_positions, sizeof(KV) == 2, max_buffers);
    LaunchHd<HD>(out, scratch, counters, q, k_cache, v_cache, block_tables, pos, S, A, split, buffers, q_scale,
                 kv_scale.v, stream);
  };
  switch (A.head_dim) {
    case 32: launch(std::integral_constant<int, 32>{}); break;
    case 64: launch(std::integral_constant<int, 64>{}); break;
    default: launch(std::integral_constant<int, 128>{}); break;
  }
}

}  // namespace

int DecodeAttentionCarveoutPercent(int buffers) {
  // The head_dim 128 kernel's block, double-buffered ([0]) and deep ([1]), asked once.
  static const std::array<int, 2> percent = [] {
    const int per_sm = CurrentDeviceAttribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    const int reserved = CurrentDeviceAttribute(cudaDevAttrReservedSharedMemoryPerBlock);
    const auto need = [&](auto kernel, int64_t dynamic) {
      cudaFuncAttributes attr{};
      CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
      const int64_t bytes = dynamic + static_cast<int64_t>(attr.sharedSizeBytes) + reserved;
      return static_cast<int>(std::min<int64_t>(100, (100 * bytes + per_sm - 1) / per_sm));
    };
    return std::array<int, 2>{
        need(AttentionDecodeKernel<128, __nv_bfloat16, true>, DecodeTile<128>::kSmemBytes),
        need(AttentionDecodeKernel<128, __nv_bfloat16, true, kMaxDecodeBuffers>,
             DeepSmemBytes<128>(kMaxDecodeBuffers))};
  }();
  return percent[buffers > 2 ? 1 : 0];
}

bool attention_decode_supported(const AttentionShape& A) {
  if (A.n_kv_heads <= 0 || A.n_heads % A.n_kv_heads != 0 || A.block_size <= 0) return false;
  const int64_t group = A.n_heads / A.n_kv_heads;
  return (A.head_dim == 32 || A.head_dim == 64 || A.head_dim == 128) && group <= 16 && A.q_stride % 4 == 0;
}

int64_t attention_decode_parts(int64_t S, const AttentionShape& A, int64_t max_positions) {
  return Split(S, A, max_positions).parts;
}

int64_t attention_decode_scratch_floats(int64_t S, const AttentionShape& A, int64_t max_positions) {
  const DecodeSplit split = Split(S, A, max_positions);
  return split.parts == 1 || split.cluster ? 0 : S * A.n_heads * split.parts * (A.head_dim + 2);
}

int64_t attention_decode_counter_count(int64_t S, const AttentionShape& A) { return S * A.n_kv_heads; }

int attention_decode_buffers(int64_t S, const AttentionShape& A, int64_t max_positions, bool bf16_cache,
                             int max_buffers) {
  if (!attention_decode_supported(A) || S <= 0 || max_positions < 1) return 2;
  switch (A.head_dim) {
    case 32: return BuffersFor<32>(S, A, max_positions, bf16_cache, max_buffers);
    case 64: return BuffersFor<64>(S, A, max_positions, bf16_cache, max_buffers);
    default: return BuffersFor<128>(S, A, max_positions, bf16_cache, max_buffers);
  }
}

void attention_decode(float* out, float* scratch, uint32_t* counters, const float* q, const bf16_bits* k_cache,
                      const bf16_bits* v_cache, const int32_t* block_tables, const int32_t* pos, int64_t S,
                      const AttentionShape& A, int64_t max_positions, float scale, cudaStream_t stream,
                      KvScale kv_scale, int max_buffers) {
  LaunchDecode(out, scratch, counters, q, reinterpret_cast<const __nv_bfloat16*>(k_cache),
               reinterpret_cast<const __nv_bfloat16*>(v_cache), block_tables, pos, S, A, max_positions, scale,
               kv_scale, stream, max_buffers);
}

void attention_decode(float* out, float* scratch, uint32_t* counters, const float* q, const fp8_e4m3* k_cache,
                      const fp8_e4m3* v_cache, const int32_t* block_tables, const int32_t* pos, int64_t S,
                      const AttentionShape& A, int64_t max_positions, float scale, cudaStream_t stream,
                      KvScale kv_scale, int max_buffers) {
  LaunchDecode(out, scratch, counters, q, reinterpret_cast<const __nv_fp8_e4m3*>(k_cache),
               reinterpret_cast<const __nv_fp8_e4m3*>(v_cache), block_tables, pos, S, A, max_positions, scale,
               kv_scale, stream, max_buffers);
}

}  // namespace tandem::kernels
