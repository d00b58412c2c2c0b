#include "kernels/attention.h"

#include <cfloat>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;  // positions per warp iteration: independent loads in flight

// Scratch layout per (t, h, partition): [m, l, acc[head_dim]].
__device__ __forceinline__ float* Partial(float* scratch, int64_t t, int64_t h, int64_t part, int64_t n_heads,
                                          int64_t parts, int64_t hd) {
  return scratch + ((t * n_heads + h) * parts + part) * (hd + 2);
}

// Grid (T, n_heads, parts). Lane l of a warp holds dims [l*EPL, (l+1)*EPL) of the head; warp w
// takes positions w*kUnroll.. of the partition in strides of kWarps*kUnroll, keeping an online
// softmax (running max m, sum l, weighted value acc); the block merges its warps, then writes
// the partition's (m, l, acc) for the merge kernel.
template <int EPL, typename KV>
__global__ void __launch_bounds__(kWarps * 32) AttentionPartitionKernel(
    float* scratch, const float* q, const KV* kc, const KV* vc, const int32_t* block_tables,
    const int32_t* token_seq, const int32_t* pos, AttentionShape A, int64_t parts, float scale) {
  const int64_t t = blockIdx.x, h = blockIdx.y, part = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t hd = A.head_dim, kvh = h / (A.n_heads / A.n_kv_heads), kv_dim = A.n_kv_heads * hd;
  const int64_t n = static_cast<int64_t>(pos[t]) + 1;
  const int64_t begin = part * kAttentionPartition, end = min(n, begin + kAttentionPartition);
  const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t]) * A.max_blocks;

  float qv[EPL];
#pragma unroll
  for (int e = 0; e < EPL; ++e) qv[e] = q[t * A.q_stride + h * hd + lane * EPL + e] * scale;
  float m = -FLT_MAX, l = 0.0f, acc[EPL];
#pragma unroll
  for (int e = 0; e < EPL; ++e) acc[e] = 0.0f;

  for (int64_t j0 = begin + warp * kUnroll; j0 < end; j0 += kWarps * kUnroll) {
    float s[kUnroll];
    int64_t off[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = j0 + u;
      const int64_t jj = j < end ? j : begin;  // a valid position; masked below
      off[u] = (static_cast<int64_t>(table[jj / A.block_size]) * A.block_size + jj % A.block_size) * kv_dim +
               kvh * hd + lane * EPL;
      float d = 0;
#pragma unroll
      for (int e = 0; e < EPL; ++e) d += qv[e] * KvLoad(kc + off[u] + e);
      s[u] = d;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) s[u] = j0 + u < end ? WarpSum(s[u]) : -FLT_MAX;
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) m_new = fmaxf(m_new, s[u]);
    const float corr = __expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int e = 0; e < EPL; ++e) acc[e] *= corr;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (j0 + u < end) {
        const float p = __expf(s[u] - m_new);
        l += p;
#pragma unroll
        for (int e = 0; e < EPL; ++e) acc[e] += p * KvLoad(vc + off[u] + e);
      }
    }
    m = m_new;
  }

  // Merge the warps of the block.
  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ float sm_acc[kWarps][32 * EPL];
  if (lane == 0) sm_m[warp] = m, sm_l[warp] = l;
#pragma unroll
  for (int e = 0; e < EPL; ++e) sm_acc[warp][lane * EPL + e] = acc[e];
  __syncthreads();
  float* dst = Partial(scratch, t, h, part, A.n_heads, parts, hd);
  float M = -FLT_MAX;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm_m[w]);
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) a += sm_l[w] > 0 ? sm_acc[w][d] * __expf(sm_m[w] - M) : 0.0f;
    dst[2 + d] = a;
  }
  if (threadIdx.x == 0) {
    float L = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) L += sm_l[w] > 0 ? sm_l[w] * __expf(sm_m[w] - M) : 0.0f;
    dst[0] = M;
    dst[1] = L;  // 0 for an empty partition (beyond pos)
  }
}

// Grid (T, n_heads), head_dim threads: out = sum_p acc_p e^(m_p - M) / sum_p l_p e^(m_p - M).
__global__ void AttentionMergeKernel(float* out, const float* scratch, const int32_t* pos, AttentionShape A,
                                     int64_t parts) {
  const int64_t t = blockIdx.x, h = blockIdx.y, d = threadIdx.x, hd = A.head_dim;
  const int64_t used = (static_cast<int64_t>(pos[t]) + kAttentionPartition) / kAttentionPartition;
  const float* base = scratch + (t * A.n_heads + h) * parts * (hd + 2);
  float M = -FLT_MAX;
  for (int64_t p = 0; p < used; ++p) M = fmaxf(M, base[p * (hd + 2)]);
  float L = 0, a = 0;
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
  const int64_t parts = Parts(max_positions);
  dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(A.n_heads), static_cast<unsigned>(parts));
  switch (A.head_dim / 32) {
    case 1: AttentionPartitionKernel<1, KV><<<grid, kWarps * 32, 0, stream>>>(scratch, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, scale); break;
    case 2: AttentionPartitionKernel<2, KV><<<grid, kWarps * 32, 0, stream>>>(scratch, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, scale); break;
    case 4: AttentionPartitionKernel<4, KV><<<grid, kWarps * 32, 0, stream>>>(scratch, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, scale); break;
    case 8: AttentionPartitionKernel<8, KV><<<grid, kWarps * 32, 0, stream>>>(scratch, q, k_cache, v_cache, block_tables, token_seq, pos, A, parts, scale); break;
    default: KERNEL_REQUIRE(false && "head_dim must be 32, 64, 128 or 256");
  }
  KERNEL_CHECK();
  AttentionMergeKernel<<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(A.n_heads)),
                         static_cast<unsigned>(A.head_dim), 0, stream>>>(out, scratch, pos, A, parts);
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
