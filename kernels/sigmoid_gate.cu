#include "kernels/sigmoid_gate.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;

// Both kernels are launched with PDL (kernels/launch.cuh) like the per-layer kernels around them:
// they let the next kernel start launching at once and wait for the previous one before any access.

__device__ __forceinline__ float SigmoidF(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void SigmoidGateKernel(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride) {
  GridDepLaunchDependents();
  GridDepWait();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= T * n) return;
  const int64_t t = idx / n, i = idx % n;
  att[idx] *= SigmoidF(gates[t * gate_stride + i]);
}

// One block per token: the gate's dot product (block reduction), then the scaled add.
__global__ void __launch_bounds__(kThreads) SigmoidGatedAddKernel(float* out, const float* y, const float* x,
                                                                  const uint16_t* w_gate, int64_t H) {
  GridDepLaunchDependents();
  GridDepWait();
  const int64_t t = blockIdx.x;
  const float* xr = x + t * H;
  float s = 0;
  for (int64_t i = threadIdx.x; i < H; i += kThreads) s += xr[i] * Bf16At(w_gate, i);
  __shared__ float warp_sums[kThreads / 32];
  s = WarpSum(s);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
  const float g = SigmoidF(total);
  const float* yr = y + t * H;
  float* o = out + t * H;
  for (int64_t i = threadIdx.x; i < H; i += kThreads) o[i] += g * yr[i];
}

}  // namespace

void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride, cudaStream_t stream) {
  KERNEL_REQUIRE(gate_stride >= n);
  if (T * n == 0) return;
  Launch(SigmoidGateKernel, dim3(static_cast<unsigned>((T * n + kThreads - 1) / kThreads)), dim3(kThreads), 0, stream,
         att, gates, T, n, gate_stride);
  KERNEL_CHECK();
}

void sigmoid_gated_add(float* out, const float* y, const float* x, const bf16_bits* w_gate, int64_t T, int64_t H,
                       cudaStream_t stream) {
  KERNEL_REQUIRE(out != y && out != x);
  if (T == 0) return;
  Launch(SigmoidGatedAddKernel, dim3(static_cast<unsigned>(T)), dim3(kThreads), 0, stream, out, y, x, w_gate, H);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
