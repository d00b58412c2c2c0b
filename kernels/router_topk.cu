#include "kernels/router_topk.h"

#include <cfloat>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

// One warp per token: lane l holds experts l, l+32, ... (kPerLane of them, in registers: 8 for up
// to 256 experts, 16 for Qwen3-Next's 512); K rounds of a warp-wide arg-max.
template <int kMaxPerLane>
__global__ void RouterTopkKernel(int32_t* ids, float* weights, const float* logits, int64_t T, int E, int K,
                                 bool renormalize, bool shared) {
  GridDepLaunchDependents();
  GridDepWait();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (t >= T) return;
  // With the shared expert: one more logit per row (its gate) and one more output per token.
  const int64_t LS = E + (shared ? 1 : 0), KS = K + (shared ? 1 : 0);
  float p[kMaxPerLane];
  float mx = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int e = lane + 32 * j;
    p[j] = e < E ? logits[t * LS + e] : -FLT_MAX;
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
      ids[t * KS + k] = best_e;
      weights[t * KS + k] = prob;
    }
  }
  if (renormalize && lane == 0) {
    for (int k = 0; k < K; ++k) weights[t * KS + k] /= ksum;
  }
  if (shared && lane == 0) {
    ids[t * KS + K] = E;
    weights[t * KS + K] = 1.0f / (1.0f + expf(-logits[t * LS + E]));
  }
}

}  // namespace

void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize, cudaStream_t stream, bool shared_expert) {
  KERNEL_REQUIRE(E <= kRouterMaxExperts && K >= 1 && K <= E);
  if (T == 0) return;
  constexpr int kTokensPerBlock = 4;
  const dim3 grid(static_cast<unsigned>((T + kTokensPerBlock - 1) / kTokensPerBlock)), block(kTokensPerBlock * 32);
  if (E <= 256) {
    Launch(RouterTopkKernel<8>, grid, block, 0, stream, ids, weights, logits, T, static_cast<int>(E),
           static_cast<int>(K), renormalize, shared_expert);
  } else {
    Launch(RouterTopkKernel<16>, grid, block, 0, stream, ids, weights, logits, T, static_cast<int>(E),
           static_cast<int>(K), renormalize, shared_expert);
  }
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
