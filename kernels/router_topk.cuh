// The routing of one token by one warp (router_topk.h): shared by router_topk's kernel and the
// router product that routes its own tokens (norm_matmul.h, FusedRouting), so both give the same
// ids and the same weights bit for bit.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/device_utils.cuh"

namespace tandem::kernels::detail {

// Softmax over the token's E logits (row; with `shared`, logit E is the shared expert's gate), the
// top K experts (ties: lower index first), their weights (renormalised to sum 1 when
// `renormalize`), then with `shared` expert E with weight sigmoid(row[E]). Lane 0 writes ids and
// weights (K, or K + 1 with `shared`). Lane l holds experts l, l + 32, ...: kMaxPerLane * 32 >= E.
// `Load` reads the row (the fused router reads logits other blocks wrote: through L2).
template <int kMaxPerLane, typename Load>
__device__ __forceinline__ void WarpRouteToken(int32_t* ids, float* weights, Load load, int E, int K,
                                               bool renormalize, bool shared, int lane) {
  float p[kMaxPerLane];
  float mx = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int e = lane + 32 * j;
    p[j] = e < E ? load(e) : -FLT_MAX;
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
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) p[j] = lane + 32 * j == best_e ? -1.0f : p[j];
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
    weights[K] = 1.0f / (1.0f + expf(-load(E)));
  }
}

}  // namespace tandem::kernels::detail
