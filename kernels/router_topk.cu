#include "kernels/router_topk.h"

#include <cfloat>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

// One block per token, a thread per expert (blockDim: E rounded up to a warp). The softmax's max and
// sum are block reductions; each expert's rank among the probabilities (ties: the lower expert
// first) is a count over all of them read from shared memory, and the experts of rank < K write
// their slot. The renormalising sum adds the K probabilities in rank order. (The warp-per-token form
// before it took K dependent rounds of a warp-wide arg-max; same-run A/B on one H100, session 33:
// batch 1 / 1k 3.242 ms against 3.274 with bf16 weights, 2.265 against 2.325 FP8, 2.459 against 2.510
// NVFP4; batch 8 0.2-0.7% faster: docs/bench/decode-h200.md.)
template <int kMaxExperts>
__global__ void __launch_bounds__(kMaxExperts) RouterTopkKernel(int32_t* ids, float* weights, const float* logits,
                                                                int E, int K, bool renormalize, bool shared) {
  GridDepWait();
  // moe_gate_up launches only after this wait: before its own wait it asks the L2 for the next
  // layer's q/k/v weights (kernels/l2_prefetch.h; 21 MB in bf16, 10.5 FP8, 5.9 NVFP4), which at this
  // kernel's start went out while the router product, this kernel's predecessor, still waited on
  // its loads. Same-run A/B, one H100, session 50, on top of the later triggers of attention_decode
  // and moe_down: FP8 -0.6% to -1.2%, NVFP4 -0.6% to -2.0% at batch 1 and 8, bf16 -0.3% to +0.4%
  // (docs/bench/decode-h200.md).
  GridDepLaunchDependents();
  const int64_t t = blockIdx.x;
  const int e = threadIdx.x, lane = e % 32, warp = e / 32, warps = blockDim.x / 32;
  // With the shared expert: one more logit per row (its gate) and one more output per token.
  const int64_t LS = E + (shared ? 1 : 0), KS = K + (shared ? 1 : 0);
  __shared__ float4 probs4[kMaxExperts / 4];
  __shared__ float red[kMaxExperts / 32];
  __shared__ float top[kMaxExperts];
  float* probs = reinterpret_cast<float*>(probs4);
  const float v = e < E ? logits[t * LS + e] : -FLT_MAX;
  const float wmax = WarpMax(v);
  if (lane == 0) red[warp] = wmax;
  __syncthreads();
  float mx = red[0];
  for (int i = 1; i < warps; ++i) mx = fmaxf(mx, red[i]);
  __syncthreads();  // red is reused below
  const float p = e < E ? expf(v - mx) : -1.0f;  // -1: never chosen, never counted above a probability
  probs[e] = p;
  const float wsum = WarpSum(e < E ? p : 0.0f);
  if (lane == 0) red[warp] = wsum;
  __syncthreads();
  float sum = 0;
  for (int i = 0; i < warps; ++i) sum += red[i];
  if (e < E) {
    int rank = 0;
    for (int j4 = 0; j4 < (E + 3) / 4; ++j4) {
      const float4 q = probs4[j4];
      const int j = 4 * j4;
      rank += (q.x > p || (q.x == p && j < e)) + (q.y > p || (q.y == p && j + 1 < e)) +
              (q.z > p || (q.z == p && j + 2 < e)) + (q.w > p || (q.w == p && j + 3 < e));
    }
    if (rank < K) {
      ids[t * KS + rank] = e;
      top[rank] = p / sum;
    }
  }
  __syncthreads();
  if (e < K) {
    float w = top[e];
    if (renormalize) {
      float ksum = 0;
      for (int k = 0; k < K; ++k) ksum += top[k];
      w /= ksum;
    }
    weights[t * KS + e] = w;
  }
  if (shared && e == 0) {
    ids[t * KS + K] = E;
    weights[t * KS + K] = 1.0f / (1.0f + expf(-logits[t * LS + E]));
  }
}

}  // namespace

void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize, cudaStream_t stream, bool shared_expert) {
  KERNEL_REQUIRE(E <= kRouterMaxExperts && K >= 1 && K <= E);
  if (T == 0) return;
  const unsigned threads = static_cast<unsigned>((E + 31) / 32 * 32);
  if (E <= 256) {
    Launch(RouterTopkKernel<256>, dim3(static_cast<unsigned>(T)), dim3(threads), 0, stream, ids, weights, logits,
           static_cast<int>(E), static_cast<int>(K), renormalize, shared_expert);
  } else {
    Launch(RouterTopkKernel<kRouterMaxExperts>, dim3(static_cast<unsigned>(T)), dim3(threads), 0, stream, ids, weights,
           logits, static_cast<int>(E), static_cast<int>(K), renormalize, shared_expert);
  }
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
