// The top-k of one token's router logits by one warp: router_topk's kernel, and the router
// product's fused epilogue (kernels/norm_matmul.h add_rmsnorm_matmul_topk), where the logits were
// written by other blocks of the same kernel and are therefore read past L1 (__ldcg).
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/device_utils.cuh"

namespace tandem::kernels {

// Lane l holds experts l, l+32, ... (kMaxPerLane of them, in registers: 8 for up to 256 experts,
// 16 for Qwen3-Next's 512); K rounds of a warp-wide arg-max. `logits` is the token's row (E logits,
// plus the shared expert's gate logit when `shared`); ids/weights its K (+1) outputs.
template <int kMaxPerLane>
__device__ __forceinline__ void TopkWarp(int32_t* ids, float* weights, const float* logits, int E, int K,
                                         bool renormalize, bool shared, int lane) {
  float p[kMaxPerLane];
  float mx = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int e = lane + 32 * j;
    p[j] = e < E ? __ldcg(logits + e) : -FLT_MAX;
    mx = fmaxf(mx, p[j]);
  }
  mx = WarpMax(mx);
  float sum = 0;
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int e = lane + 32 * j;
    p[j] = e < E ? expf(p[j] - mx) : -1.0f;  // -1: never chosen
    if (e < E) sum += p[j];
  }
  sum = WarpSum(sum);
  float ksum = 0;
  for (int k = 0; k < K; ++k) {
    // Best of this lane (lowest expert on ties), then of the warp.
    float best = -2.0f;
    int best_e = 1 << 30;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      if (p[j] > best) best = p[j], best_e = lane + 32 * j;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (ob > best || (ob == best && oe < best_e)) best = ob, best_e = oe;
    }
    if (best_e % 32 == lane) {
#pragma unroll
      for (int j = 0; j < kMaxPerLane; ++j) {
        if (j == best_e / 32) p[j] = -1.0f;
      }
    }
    const float prob = best / sum;
    ksum += prob;
    if (lane == 0) {
      ids[k] = best_e;
      weights[k] = prob;
    }
  }
  if (renormalize && lane == 0) {
    for (int k = 0; k < K; ++k) weights[k] /= ksum;
  }
  if (shared && lane == 0) {
    ids[K] = E;
    weights[K] = 1.0f / (1.0f + expf(-__ldcg(logits + E)));
  }
}

}  // namespace tandem::kernels
