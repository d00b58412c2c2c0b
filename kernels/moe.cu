#include "kernels/moe.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/gemm.h"
#include "kernels/matvec.cuh"
#include "kernels/moe_gemm.h"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 8;

// Grid (ceil(I / kWarps), T*K): warp computes row i of gate and of up for pair blockIdx.y.
__global__ void __launch_bounds__(kWarps * 32) MoeGateUpKernel(float* act, const float* x, const int32_t* ids,
                                                               const uint16_t* gate_up, int64_t K, int64_t H,
                                                               int64_t I) {
  const int lane = threadIdx.x % 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t p = blockIdx.y;
  if (i >= I) return;
  const uint16_t* we = gate_up + static_cast<int64_t>(ids[p]) * 2 * I * H;
  const float* xt = x + (p / K) * H;
  const uint16_t* rows[2] = {we + i * H, we + (I + i) * H};  // gate row i, up row i
  const float* xs[2] = {xt, xt};
  float gu[2];
  RowsDot<2>(gu, rows, xs, H, lane);
  if (lane == 0) act[p * I + i] = SiluF(gu[0]) * gu[1];
}

// Grid (ceil(H / kWarps), T): warp computes output h of token t over its K experts.
__global__ void __launch_bounds__(kWarps * 32) MoeDownKernel(float* out, const float* act, const int32_t* ids,
                                                             const float* weights, const uint16_t* down, int64_t K,
                                                             int64_t H, int64_t I) {
  const int lane = threadIdx.x % 32;
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t t = blockIdx.y;
  if (h >= H) return;
  float sum = 0;
  if (K == 8) {  // Qwen3-30B-A3B: the eight experts' rows in flight together
    const uint16_t* rows[8];
    const float* xs[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      rows[k] = down + (static_cast<int64_t>(ids[t * 8 + k]) * H + h) * I;
      xs[k] = act + (t * 8 + k) * I;
    }
    float d[8];
    RowsDot<8>(d, rows, xs, I, lane);
#pragma unroll
    for (int k = 0; k < 8; ++k) sum += weights[t * 8 + k] * d[k];
    if (lane == 0) out[t * H + h] = sum;
    return;
  }
  for (int64_t k = 0; k < K; ++k) {
    const int64_t p = t * K + k;
    float d[1];
    RowDot<1>(d, down + (static_cast<int64_t>(ids[p]) * H + h) * I, act + p * I, I, 1, lane);
    sum += weights[p] * d[0];
  }
  if (lane == 0) out[t * H + h] = sum;
}

}  // namespace

void moe_gate_up(float* act, const float* x, const int32_t* ids, const bf16_bits* gate_up, int64_t T,
                 int64_t K, int64_t H, int64_t I, cudaStream_t stream) {
  KERNEL_REQUIRE(H % 8 == 0);
  if (T == 0) return;
  // Prefill: grouped tensor-core GEMM over the pairs sorted by expert (moe_gemm.h).
  if (UseGemmPath(T, stream) && moe_gate_up_grouped(act, x, ids, gate_up, T, K, H, I, stream)) return;
  dim3 grid(static_cast<unsigned>((I + kWarps - 1) / kWarps), static_cast<unsigned>(T * K));
  MoeGateUpKernel<<<grid, kWarps * 32, 0, stream>>>(act, x, ids, gate_up, K, H, I);
  KERNEL_CHECK();
}

void moe_down(float* out, const float* act, const int32_t* ids, const float* weights, const bf16_bits* down,
              int64_t T, int64_t K, int64_t H, int64_t I, cudaStream_t stream) {
  KERNEL_REQUIRE(I % 8 == 0);
  if (T == 0) return;
  if (UseGemmPath(T, stream) && moe_down_grouped(out, act, ids, weights, down, T, K, H, I, stream)) return;
  dim3 grid(static_cast<unsigned>((H + kWarps - 1) / kWarps), static_cast<unsigned>(T));
  MoeDownKernel<<<grid, kWarps * 32, 0, stream>>>(out, act, ids, weights, down, K, H, I);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
