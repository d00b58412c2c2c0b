#include "kernels/sigmoid_gate.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;

// The kernel is launched with PDL (kernels/launch.cuh) like the per-layer kernels around them:
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

}  // namespace

void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride, cudaStream_t stream) {
  KERNEL_REQUIRE(gate_stride >= n);
  if (T * n == 0) return;
  Launch(SigmoidGateKernel, dim3(static_cast<unsigned>((T * n + kThreads - 1) / kThreads)), dim3(kThreads), 0, stream,
         att, gates, T, n, gate_stride);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
