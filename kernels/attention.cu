#include "kernels/attention.h"

#include <cfloat>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 8;
constexpr int kPerWarp = 8;  // positions per warp: kWarps * kPerWarp = kAttentionPartition
static_assert(kWarps * kPerWarp == kAttentionPartition);

// Scratch layout per (t, h, partition): [m, l, acc[head_dim]].
__device__ __forceinline__ float* Partial(float* scratch, int64_t t, int64_t h, int64_t part, int64_t n_heads,
                                          int64_t parts, int64_t hd) {
  return scratch + ((t * n_heads + h) * parts + part) * (hd + 2);
}

// EPL consecutive KV elements as float, with the widest loads the alignment allows.
template <int EPL>
__device__ __forceinline__ void LoadKv(const float* p, float out[EPL]) {
  if constexpr (EPL % 4 == 0) {
#pragma unroll
    for (int e = 0; e < EPL; e += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + e);
      out[e] = v.x, out[e + 1] = v.y, out[e + 2] = v.z, out[e + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int e = 0; e < EPL; ++e) out[e] = p[e];
  }
}
template <int EPL>
__device__ __forceinline__ void LoadKv(const __nv_bfloat16* p, float out[EPL]) {
  if constexpr (EPL % 4 == 0) {
#pragma unroll
    for (int e = 0; e < EPL; e += 4) {
      const uint2 raw = *reinterpret_cast<const uint2*>(p + e);
      const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
      const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
      out[e] = a.x, out[e + 1] = a.y, out[e + 2] = b.x, out[e + 3] = b.y;
    }
  } else {
#pragma unroll
    for (int e = 0; e < EPL; ++e) out[e] = __bfloat162float(p[e]);
  }
}

// Grid (n_heads * parts, T): block (h, part) of token t covers positions [part*P, part*P + P) of
// its sequence, P = kAttentionPartition. Warp w takes kPerWarp consecutive positions and issues all
// their K and V loads at once (decode is latency-bound: one round trip per warp, not one per
// position), lane l holding dims [l*EPL, (l+1)*EPL). Heads vary fastest in the grid, so the q heads
// sharing a kv head run side by side and their K/V reads hit L2. The block merges its warps' softmax
// statistics and writes the partition's (m, l, acc) for the merge kernel.
template <int EPL, typename KV>
__global__ void __launch_bounds__(kWarps * 32) AttentionPartitionKernel(
    float* scratch, const float* q, const KV* kc, const KV* vc, const int32_t* block_tables,
    const int32_t* token_seq, const int32_t* pos, AttentionShape A, int64_t parts, float scale) {
  GridDepLaunchDependents();
  const int64_t h = blockIdx.x % A.n_heads, part = blockIdx.x / A.n_heads, t = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t hd = A.head_dim, kvh = h / (A.n_heads / A.n_kv_heads), kv_dim = A.n_kv_heads * hd;
  GridDepWait();
  const int64_t n = static_cast<int64_t>(pos[t]) + 1;
  const int64_t begin = part * kAttentionPartition, end = min(n, begin + kAttentionPartition);
  if (begin >= end) return;  // beyond this token's position: the merge never reads it
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * A.max_blocks;

  float qv[EPL];
#pragma unroll
  for (int e = 0; e < EPL; ++e) qv[e] = q[t * A.q_stride + h * hd + lane * EPL + e] * scale;

  const int64_t j0 = begin + warp * kPerWarp;
  float kr[kPerWarp][EPL], vr[kPerWarp][EPL];
#pragma unroll
  for (int u = 0; u < kPerWarp; ++u) {
    const int64_t j = j0 + u < end ? j0 + u : begin;  // a valid position; masked below
    const int64_t off =
        (static_cast<int64_t>(table[j / A.block_size]) * A.block_size + j % A.block_size) * kv_dim + kvh * hd +
        lane * EPL;
    LoadKv<EPL>(kc + off, kr[u]);
    LoadKv<EPL>(vc + off, vr[u]);
  }
  float s[kPerWarp];
#pragma unroll
  for (int u = 0; u < kPerWarp; ++u) {
    float d = 0;
#pragma unroll
    for (int e = 0; e < EPL; ++e) d += qv[e] * kr[u][e];
    s[u] = d;
  }
#pragma unroll
  for (int u = 0; u < kPerWarp; ++u) s[u] = j0 + u < end ? WarpSum(s[u]) : -FLT_MAX;
  float m = -FLT_MAX;
#pragma unroll
  for (int u = 0; u < kPerWarp; ++u) m = fmaxf(m, s[u]);
  float l = 0, acc[EPL];
#pragma unroll
  for (int e = 0; e < EPL; ++e) acc[e] = 0.0f;
  if (m > -FLT_MAX) {
#pragma unroll
    for (int u = 0; u < kPerWarp; ++u) {
      if (j0 + u < end) {
        const float p = __expf(s[u] - m);
        l += p;
#pragma unroll
        for (int e = 0; e < EPL; ++e) acc[e] += p * vr[u][e];
      }
    }
  }

  // Merge the warps of the block (a warp past `end` has l == 0 and drops out).
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
    dst[2 + d] = a;
  }
  if (threadIdx.x == 0) {
    float L = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) L += sm_l[w] * wgt[w];
    dst[0] = M;
    dst[1] = L;
  }
}

// Grid (n_heads, T), head_dim threads: out = sum_p acc_p e^(m_p - M) / sum_p l_p e^(m_p - M) over the
// partitions up to the token's position. The maximum is a block reduction; the sums walk the
// partitions with independent loads.
__global__ void AttentionMergeKernel(float* out, const float* scratch, const int32_t* pos, AttentionShape A,
                                     int64_t parts) {
  GridDepLaunchDependents();
  const int64_t h = blockIdx.x, t = blockIdx.y, d = threadIdx.x, hd = A.head_dim;
  GridDepWait();
  const int64_t used = (static_cast<int64_t>(pos[t]) + kAttentionPartition) / kAttentionPartition;
  const float* base = scratch + (t * A.n_heads + h) * parts * (hd + 2);
  float mx = -FLT_MAX;
  for (int64_t p = d; p < used; p += hd) mx = fmaxf(mx, base[p * (hd + 2)]);
  __shared__ float red[32];
  mx = WarpMax(mx);
  if (d % 32 == 0) red[d / 32] = mx;
  __syncthreads();
  float M = -FLT_MAX;
  for (int i = 0; i < static_cast<int>(hd / 32); ++i) M = fmaxf(M, red[i]);
  float L = 0, a = 0;
#pragma unroll 8
  for (int64_t p = 0; p < used; ++p) {
    const float* part = base + p * (hd + 2);
    const float w = __expf(part[0] - M);
    L += part[1] * w;
    a += part[2 + d] * w;
  }
  out[t * A.n_heads * hd + h * hd + d] = a / L;
}

int64_t Parts(int64_t max_positions) {
  return (max_positions + kAttentionPartition - 1) / kAttentionPartition;
}

}  // namespace

int64_t attention_scratch_floats(int64_t T, const AttentionShape& A, int64_t max_positions) {
  return T * A.n_heads * Parts(max_positions) * (A.head_dim + 2);
}

template <typename KV>
void LaunchAttention(float* out, float* scratch, const float* q, const KV* k_cache,
                     const KV* v_cache, const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* pos, int64_t T, const AttentionShape& A, int64_t max_positions,
                     float scale, cudaStream_t stream) {
  KERNEL_REQUIRE(A.n_kv_heads > 0 && A.n_heads % A.n_kv_heads == 0);
  KERNEL_REQUIRE(A.head_dim % 32 == 0 && A.head_dim >= 32 && A.head_dim <= 256);
  KERNEL_REQUIRE(max_positions >= 1);
  if (T == 0) return;
  KERNEL_REQUIRE(T <= 65535);
  const int64_t parts = Parts(max_positions);
  const dim3 grid(static_cast<unsigned>(A.n_heads * parts), static_cast<unsigned>(T));
  const dim3 block(kWarps * 32);
  switch (A.head_dim / 32) {
    case 1: Launch(AttentionPartitionKernel<1, KV>, grid, block, 0, stream, scratch, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, scale); break;
    case 2: Launch(AttentionPartitionKernel<2, KV>, grid, block, 0, stream, scratch, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, scale); break;
    case 4: Launch(AttentionPartitionKernel<4, KV>, grid, block, 0, stream, scratch, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, scale); break;
    case 8: Launch(AttentionPartitionKernel<8, KV>, grid, block, 0, stream, scratch, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, scale); break;
    default: KERNEL_REQUIRE(false && "head_dim must be 32, 64, 128 or 256");
  }
  KERNEL_CHECK();
  Launch(AttentionMergeKernel, dim3(static_cast<unsigned>(A.n_heads), static_cast<unsigned>(T)),
         dim3(static_cast<unsigned>(A.head_dim)), 0, stream, out, scratch, pos, A, parts);
  KERNEL_CHECK();
}

void paged_attention(float* out, float* scratch, const float* q, const bf16_bits* k_cache,
                     const bf16_bits* v_cache, const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* pos, int64_t T, const AttentionShape& A, int64_t max_positions,
                     float scale, cudaStream_t stream) {
  LaunchAttention(out, scratch, q, reinterpret_cast<const __nv_bfloat16*>(k_cache),
                  reinterpret_cast<const __nv_bfloat16*>(v_cache), block_tables, token_seq, pos, T, A, max_positions,
                  scale, stream);
}

void paged_attention(float* out, float* scratch, const float* q, const float* k_cache, const float* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq, const int32_t* pos, int64_t T,
                     const AttentionShape& A, int64_t max_positions, float scale, cudaStream_t stream) {
  LaunchAttention(out, scratch, q, k_cache, v_cache, block_tables, token_seq, pos, T, A, max_positions, scale, stream);
}

}  // namespace tandem::kernels
