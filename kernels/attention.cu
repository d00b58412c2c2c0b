#include "kernels/attention.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 8;

// Positions a warp takes per round: its K and V loads for them are all issued at once, and the next
// round's are issued before this round is used (double buffering), so a warp waits for memory once,
// not once per position. 6 for bf16, 4 for float32 (about 100 registers: two blocks per SM), 8 for
// fp8 (its packs take half of bf16's registers).
template <typename KV>
__host__ __device__ constexpr int PerWarp() {
  return sizeof(KV) == 1 ? 8 : sizeof(KV) == 2 ? 6 : 4;
}

// Scratch layout per (t, h, partition): [m, l, acc[head_dim]].
__device__ __forceinline__ float* Partial(float* scratch, int64_t t, int64_t h, int64_t part, int64_t n_heads,
                                          int64_t parts, int64_t hd) {
  return scratch + ((t * n_heads + h) * parts + part) * (hd + 2);
}

// EPL consecutive KV elements, loaded as one (or two) vector loads.
template <typename KV, int EPL>
struct alignas(EPL * sizeof(KV) < 16 ? EPL * sizeof(KV) : 16) KvPack {
  KV v[EPL];
};
__device__ __forceinline__ float ToF(float x) { return x; }
__device__ __forceinline__ float ToF(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToF(__nv_fp8_e4m3 x) { return static_cast<float>(x); }  // exact, unscaled

// Positions per partition for a token at n positions: the whole rounds spread over the `parts` blocks.
// Computed from the token's own position (not the graph's table width), so a graph captured for a
// wide table still cuts a short context into `parts` busy blocks.
__device__ __forceinline__ int64_t PartLen(int64_t n, int64_t parts, int64_t round) {
  const int64_t rounds = (n + round - 1) / round;
  return (rounds + parts - 1) / parts * round;
}

// Partitions that hold positions of a token at n positions: those from here on are empty.
__device__ __forceinline__ int64_t UsedParts(int64_t n, int64_t part_len) { return (n + part_len - 1) / part_len; }

// out (head_dim) = sum_p acc_p e^(m_p - M) / sum_p l_p e^(m_p - M) over the `used` partials from
// `base`, by a block of at least head_dim threads (a multiple of 32). The maximum is a block
// reduction; each thread's sums walk the partitions in order with independent loads, so the bits
// do not depend on which partition block merges. The loads bypass L1: other blocks wrote the
// partials during this kernel.
__device__ __forceinline__ void MergePartials(float* out, const float* base, int64_t used, int64_t hd) {
  const int64_t d = threadIdx.x;
  float mx = -FLT_MAX;
  for (int64_t p = d; p < used; p += blockDim.x) mx = fmaxf(mx, __ldcg(base + p * (hd + 2)));
  __shared__ float red[32];
  mx = WarpMax(mx);
  if (d % 32 == 0) red[d / 32] = mx;
  __syncthreads();
  float M = -FLT_MAX;
  for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) M = fmaxf(M, red[i]);
  if (d < hd) {
    float L = 0, a = 0;
#pragma unroll 8
    for (int64_t p = 0; p < used; ++p) {
      const float* part = base + p * (hd + 2);
      const float w = __expf(__ldcg(part) - M);
      L += __ldcg(part + 1) * w;
      a += __ldcg(part + 2 + d) * w;
    }
    out[d] = a / L;
  }
}

// Grid (n_heads * parts, T): block (h, part) of token t covers positions [part*len, part*len + len) of
// its sequence (len = PartLen(pos + 1, ...), a multiple of kWarps * PerWarp). Each warp walks its share in rounds
// of PerWarp positions, lane l holding dims [l*EPL, (l+1)*EPL), with an online softmax. Heads vary
// fastest in the grid, so the q heads that share a kv head run side by side and their K/V reads hit
// L2. The block merges its warps and writes the partition's (m, l, acc). Through `counters` (one per
// (t, h), 0 at launch) the last of a token's used partitions to finish merges them into `out` and
// sets the counter back to 0 (a separate merge kernel lost its A/B: docs/cuda.md). `scale`
// includes the cache's k scale; the partials' accumulators are multiplied by its v scale.
template <int EPL, typename KV>
__global__ void __launch_bounds__(kWarps * 32) AttentionPartitionKernel(
    float* out, float* scratch, uint32_t* counters, const float* q, const KV* kc, const KV* vc,
    const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, AttentionShape A, int64_t parts,
    float scale, float v_scale, bool one_token_per_sequence) {
  constexpr int PW = PerWarp<KV>();
  using Pack = KvPack<KV, EPL>;
  GridDepLaunchDependents();
  const int64_t h = blockIdx.x % A.n_heads, part = blockIdx.x / A.n_heads, t = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t hd = A.head_dim, kvh = h / (A.n_heads / A.n_kv_heads), kv_dim = A.n_kv_heads * hd;
  // pos, token_seq and block_tables are the step's metadata (copied before the launch): read before
  // the wait, like the K/V of earlier steps below.
  const int64_t n = static_cast<int64_t>(pos[t]) + 1;
  const int64_t part_len = PartLen(n, parts, kWarps * PW);
  const int64_t begin = part * part_len, end = min(n, begin + part_len);
  if (begin >= end) return;  // beyond this token's position: neither counted nor read by the merge
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * A.max_blocks;
  // The partition's block-table entries in shared memory: a position's slot is then one shared load,
  // not a global round trip in front of every K/V load (which serialised the prefetch of a round).
  constexpr int64_t kTableCache = 512;
  __shared__ int32_t sm_table[kTableCache];
  // Slots in 32-bit arithmetic with a shift for power-of-two block sizes: 64-bit division per
  // position made this kernel instruction-bound (4+ us per round of 6 positions under ncu).
  const uint32_t bs = static_cast<uint32_t>(A.block_size);
  const bool pow2 = (bs & (bs - 1)) == 0;
  const int shift = __ffs(static_cast<int>(bs)) - 1;
  const auto block_of = [&](uint32_t j) { return pow2 ? j >> shift : j / bs; };
  const int64_t b0 = block_of(static_cast<uint32_t>(begin)),
                nb = block_of(static_cast<uint32_t>(end - 1)) - b0 + 1;
  const bool cached = nb <= kTableCache;
  if (cached) {
    for (int64_t i = threadIdx.x; i < nb; i += blockDim.x) sm_table[i] = table[b0 + i];
  }
  __syncthreads();
  const KV* kbase = kc + kvh * hd + lane * EPL;
  const KV* vbase = vc + kvh * hd + lane * EPL;

  auto load = [&](int64_t j0, Pack kr[PW], Pack vr[PW]) {
#pragma unroll
    for (int u = 0; u < PW; ++u) {
      const uint32_t j = static_cast<uint32_t>(j0 + u < end ? j0 + u : begin);  // valid; masked when used
      const uint32_t bj = block_of(j);
      const int64_t blk = cached ? sm_table[bj - b0] : table[bj];
      const int64_t off = (blk * bs + (j - bj * bs)) * kv_dim;
      kr[u] = *reinterpret_cast<const Pack*>(kbase + off);
      vr[u] = *reinterpret_cast<const Pack*>(vbase + off);
    }
  };

  float m = -FLT_MAX, l = 0, acc[EPL];
#pragma unroll
  for (int e = 0; e < EPL; ++e) acc[e] = 0.0f;
  constexpr int64_t kRound = kWarps * PW;
  Pack kr[PW], vr[PW], kn[PW], vn[PW];
  int64_t j0 = begin + warp * PW;
  // In a decode step (one token per sequence) only the token's own position n - 1 was stored by this
  // step (qk_norm_rope_store_kv, the kernel before): a first round wholly before it is loaded before
  // the wait, overlapping the previous kernel's tail; everything else after.
  const bool early = one_token_per_sequence && j0 + PW < n;
  if (early && j0 < end) load(j0, kr, vr);
  GridDepWait();  // q and the token's own K/V
  float qv[EPL];
#pragma unroll
  for (int e = 0; e < EPL; ++e) qv[e] = q[t * A.q_stride + h * hd + lane * EPL + e] * scale;
  if (!early && j0 < end) load(j0, kr, vr);
  for (; j0 < end; j0 += kRound) {
    if (j0 + kRound < end) load(j0 + kRound, kn, vn);  // next round in flight while this one is used
    float s[PW];
#pragma unroll
    for (int u = 0; u < PW; ++u) {
      float d = 0;
#pragma unroll
      for (int e = 0; e < EPL; ++e) d += qv[e] * ToF(kr[u].v[e]);
      s[u] = d;
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < PW; ++u) {
      s[u] = j0 + u < end ? WarpSum(s[u]) : -FLT_MAX;
      m_new = fmaxf(m_new, s[u]);
    }
    const float corr = __expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int e = 0; e < EPL; ++e) acc[e] *= corr;
#pragma unroll
    for (int u = 0; u < PW; ++u) {
      if (j0 + u < end) {
        const float p = __expf(s[u] - m_new);
        l += p;
#pragma unroll
        for (int e = 0; e < EPL; ++e) acc[e] += p * ToF(vr[u].v[e]);
      }
    }
    m = m_new;
#pragma unroll
    for (int u = 0; u < PW; ++u) kr[u] = kn[u], vr[u] = vn[u];
  }

  // Merge the warps of the block (a warp with no position has l == 0 and drops out).
  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ float sm_acc[kWarps][32 * EPL];
  if (lane == 0) sm_m[warp] = m, sm_l[warp] = l;
#pragma unroll
  for (int e = 0; e < EPL; ++e) sm_acc[warp][lane * EPL + e] = acc[e];
  __syncthreads();
  float* dst = Partial(scratch, t, h, part, A.n_heads, parts, hd);
  float M = -FLT_MAX;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm_l[w] > 0 ? sm_m[w] : -FLT_MAX);
  float wgt[kWarps];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) wgt[w] = sm_l[w] > 0 ? __expf(sm_m[w] - M) : 0.0f;
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) a += sm_acc[w][d] * wgt[w];
    dst[2 + d] = a * v_scale;
  }
  if (threadIdx.x == 0) {
    float L = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) L += sm_l[w] * wgt[w];
    dst[0] = M;
    dst[1] = L;
  }

  // Fused merge (the "last block" pattern): each used partition counts itself once its partial is
  // visible device-wide; the one that brings the count to `used` merges them all.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  const int64_t used = UsedParts(n, part_len);
  uint32_t* counter = counters + t * A.n_heads + h;
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == static_cast<uint32_t>(used - 1);
    if (last) *counter = 0;  // every used partition has counted: ready for the next launch and graph replay
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  MergePartials(out + (t * A.n_heads + h) * hd, Partial(scratch, t, h, 0, A.n_heads, parts, hd), used, hd);
}

// Partitions per (token, head): as many as fill the GPU's two blocks per SM (the partition kernels'
// registers allow two) in one wave, at most one per round of max_positions. Rounding up instead
// put a few blocks into a second wave.
int64_t Parts(int64_t T, const AttentionShape& A, int64_t max_positions, int64_t round) {
  const int64_t rounds = (max_positions + round - 1) / round;
  const int64_t heads = std::max<int64_t>(T * A.n_heads, 1);
  const int64_t want = std::max<int64_t>(1, 2 * SmCount() / heads);
  return std::clamp<int64_t>(want, 1, rounds);
}

}  // namespace

int64_t attention_scratch_floats(int64_t T, const AttentionShape& A, int64_t max_positions) {
  // The float32 cache's shorter round gives at least as many partitions as bf16's and fp8's.
  return T * A.n_heads * Parts(T, A, std::max<int64_t>(max_positions, 1), kWarps * PerWarp<float>()) *
         (A.head_dim + 2);
}

int64_t attention_counter_count(int64_t T, const AttentionShape& A) { return T * A.n_heads; }

template <typename KV>
void LaunchAttention(float* out, float* scratch, uint32_t* counters, const float* q, const KV* k_cache,
                     const KV* v_cache, const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* pos, int64_t T, const AttentionShape& A, int64_t max_positions,
                     float scale, KvScale kv_scale, cudaStream_t stream, bool one_token_per_sequence) {
  KERNEL_REQUIRE(A.n_kv_heads > 0 && A.n_heads % A.n_kv_heads == 0);
  // head_dim <= the partition block's kWarps * 32 threads, which the fused merge needs.
  KERNEL_REQUIRE(A.head_dim % 32 == 0 && A.head_dim >= 32 && A.head_dim <= 256);
  KERNEL_REQUIRE(max_positions >= 1);
  if (T == 0) return;
  KERNEL_REQUIRE(T <= 65535);
  KERNEL_REQUIRE(counters != nullptr);
  const int64_t round = kWarps * PerWarp<KV>();
  const int64_t parts = Parts(T, A, max_positions, round);
  const dim3 grid(static_cast<unsigned>(A.n_heads * parts), static_cast<unsigned>(T));
  const dim3 block(kWarps * 32);
  const float qk_scale = scale * kv_scale.k, v_scale = kv_scale.v;  // exact for scales of 1
  switch (A.head_dim / 32) {
    case 1: Launch(AttentionPartitionKernel<1, KV>, grid, block, 0, stream, out, scratch, counters, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, qk_scale, v_scale, one_token_per_sequence); break;
    case 2: Launch(AttentionPartitionKernel<2, KV>, grid, block, 0, stream, out, scratch, counters, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, qk_scale, v_scale, one_token_per_sequence); break;
    case 4: Launch(AttentionPartitionKernel<4, KV>, grid, block, 0, stream, out, scratch, counters, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, qk_scale, v_scale, one_token_per_sequence); break;
    case 8: Launch(AttentionPartitionKernel<8, KV>, grid, block, 0, stream, out, scratch, counters, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, qk_scale, v_scale, one_token_per_sequence); break;
    default: KERNEL_REQUIRE(false && "head_dim must be 32, 64, 128 or 256");
  }
  KERNEL_CHECK();
}

void paged_attention(float* out, float* scratch, uint32_t* counters, const float* q, const bf16_bits* k_cache,
                     const bf16_bits* v_cache, const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* pos, int64_t T, const AttentionShape& A, int64_t max_positions,
                     float scale, cudaStream_t stream, KvScale kv_scale, bool one_token_per_sequence) {
  LaunchAttention(out, scratch, counters, q, reinterpret_cast<const __nv_bfloat16*>(k_cache),
                  reinterpret_cast<const __nv_bfloat16*>(v_cache), block_tables, token_seq, pos, T, A, max_positions,
                  scale, kv_scale, stream, one_token_per_sequence);
}

void paged_attention(float* out, float* scratch, uint32_t* counters, const float* q, const float* k_cache,
                     const float* v_cache, const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos,
                     int64_t T, const AttentionShape& A, int64_t max_positions, float scale, cudaStream_t stream,
                     KvScale kv_scale, bool one_token_per_sequence) {
  LaunchAttention(out, scratch, counters, q, k_cache, v_cache, block_tables, token_seq, pos, T, A, max_positions,
                  scale, kv_scale, stream, one_token_per_sequence);
}

void paged_attention(float* out, float* scratch, uint32_t* counters, const float* q, const fp8_e4m3* k_cache,
                     const fp8_e4m3* v_cache, const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* pos, int64_t T, const AttentionShape& A, int64_t max_positions, float scale,
                     cudaStream_t stream, KvScale kv_scale, bool one_token_per_sequence) {
  LaunchAttention(out, scratch, counters, q, reinterpret_cast<const __nv_fp8_e4m3*>(k_cache),
                  reinterpret_cast<const __nv_fp8_e4m3*>(v_cache), block_tables, token_seq, pos, T, A, max_positions,
                  scale, kv_scale, stream, one_token_per_sequence);
}

}  // namespace tandem::kernels
