#include "kernels/qk_norm_rope.h"

#include <cuda_fp8.h>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

// Grid (T, n_heads + 2 * n_kv_heads): one block per head of one token, one thread per dim.
// Heads [0, nh) are q, [nh, nh + nkv) k, the rest v (only stored). K and V go into the cache
// divided by their scales (1 but for an fp8 cache with the checkpoint's scales). The step's
// metadata (pos, slot: copied before the step's first kernel), the norm weights and inv_freq never
// change during a step: they are read, and the rotation's sine and cosine computed, before the wait
// for the q/k/v product, so only the head's own values are a round trip after it.
template <typename KV>
__global__ void QkNormRopeKernel(float* qkv, KV* kc, KV* vc, const uint16_t* q_norm,
                                 const uint16_t* k_norm, const float* inv_freq, const int32_t* pos,
                                 const int32_t* slot, QkvLayout L, float eps, float w_offset, KvScale kv_scale) {
  // At the start: attention fetches its first K/V tiles before its wait, and triggering after this
  // kernel's wait delayed them (FP8 batch 1 +0.9% to +1.2%, H100, session 50).
  GridDepLaunchDependents();
  const int64_t t = blockIdx.x;
  const int head = blockIdx.y, d = threadIdx.x;
  const int64_t hd = L.head_dim, half = L.rotary_dim / 2;
  float* x = qkv + t * L.row() + head * hd;  // q, k and v heads are consecutive in the row
  const bool is_v = head >= L.n_heads + L.n_kv_heads, is_q = head < L.n_heads;
  const int64_t cache_off = is_q ? 0 : static_cast<int64_t>(slot[t]) * L.kv_dim();
  const float nw = is_v ? 0.0f : w_offset + Bf16At(is_q ? q_norm : k_norm, d);
  float s = 0, c = 1;
  if (!is_v && d < 2 * half) {
    const int i = d < half ? d : d - half;
    sincosf(static_cast<float>(pos[t]) * inv_freq[i], &s, &c);
  }
  GridDepWait();
  if (is_v) {  // v: store only
    const int64_t vh = head - L.n_heads - L.n_kv_heads;
    KvStore(vc + cache_off + vh * hd + d, x[d] / kv_scale.v);
    return;
  }
  __shared__ float vals[1024];
  __shared__ float warp_sums[32];
  float v = x[d];
  float ss = WarpSum(v * v);
  if (d % 32 == 0) warp_sums[d / 32] = ss;
  __syncthreads();
  float total = 0;
  for (int i = 0; i < (blockDim.x + 31) / 32; ++i) total += warp_sums[i];
  const float scale = rsqrtf(total / static_cast<float>(hd) + eps);
  v = nw * (v * scale);
  vals[d] = v;
  __syncthreads();
  if (d < 2 * half) v = d < half ? vals[d] * c - vals[d + half] * s : vals[d] * c + vals[d - half] * s;
  x[d] = v;
  if (!is_q) KvStore(kc + cache_off + (head - L.n_heads) * hd + d, v / kv_scale.k);
}

template <typename KV>
void Launch(float* qkv, KV* k_cache, KV* v_cache, const bf16_bits* q_norm, const bf16_bits* k_norm,
            const float* inv_freq, const int32_t* pos, const int32_t* slot, int64_t T, QkvLayout L, float eps,
            float w_offset, KvScale kv_scale, cudaStream_t stream) {
  KERNEL_REQUIRE(L.head_dim % 32 == 0 && L.head_dim <= 1024);
  KERNEL_REQUIRE(L.rotary_dim % 2 == 0 && L.rotary_dim <= L.head_dim);
  if (T == 0) return;
  dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(L.n_heads + 2 * L.n_kv_heads));
  Launch(QkNormRopeKernel<KV>, grid, dim3(static_cast<unsigned>(L.head_dim)), 0, stream, qkv, k_cache, v_cache,
         q_norm, k_norm, inv_freq, pos, slot, L, eps, w_offset, kv_scale);
  KERNEL_CHECK();
}

}  // namespace

void qk_norm_rope_store_kv(float* qkv, bf16_bits* k_cache, bf16_bits* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, cudaStream_t stream,
                           float w_offset, KvScale kv_scale) {
  Launch(qkv, reinterpret_cast<__nv_bfloat16*>(k_cache), reinterpret_cast<__nv_bfloat16*>(v_cache), q_norm, k_norm,
         inv_freq, pos, slot, T, L, eps, w_offset, kv_scale, stream);
}

void qk_norm_rope_store_kv(float* qkv, float* k_cache, float* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, cudaStream_t stream,
                           float w_offset, KvScale kv_scale) {
  Launch(qkv, k_cache, v_cache, q_norm, k_norm, inv_freq, pos, slot, T, L, eps, w_offset, kv_scale, stream);
}

void qk_norm_rope_store_kv(float* qkv, fp8_e4m3* k_cache, fp8_e4m3* v_cache, const bf16_bits* q_norm,
                           const bf16_bits* k_norm, const float* inv_freq, const int32_t* pos,
                           const int32_t* slot, int64_t T, QkvLayout L, float eps, cudaStream_t stream,
                           float w_offset, KvScale kv_scale) {
  Launch(qkv, reinterpret_cast<__nv_fp8_e4m3*>(k_cache), reinterpret_cast<__nv_fp8_e4m3*>(v_cache), q_norm, k_norm,
         inv_freq, pos, slot, T, L, eps, w_offset, kv_scale, stream);
}

}  // namespace tandem::kernels
