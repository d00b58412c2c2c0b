#include "kernels/router_topk.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/router_topk.cuh"

namespace tandem::kernels {

namespace {

// One warp per token (detail::WarpRouteToken): 8 experts a lane for up to 256 experts, 16 for
// Qwen3-Next's 512.
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
  const float* row = logits + t * LS;
  detail::WarpRouteToken<kMaxPerLane>(ids + t * KS, weights + t * KS, [&](int e) { return row[e]; }, E, K,
                                      renormalize, shared, lane);
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
