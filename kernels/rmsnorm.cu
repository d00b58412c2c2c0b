#include "kernels/rmsnorm.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;

// One block per row: add, sum of squares (block reduction), scale.
__global__ void AddRmsnormKernel(float* out, float* residual, const float* delta, const uint16_t* w,
                                 int64_t n, float eps) {
  GridDepLaunchDependents();
  GridDepWait();
  const int64_t r = blockIdx.x;
  float* x = residual + r * n;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = x[i];
    if (delta != nullptr) {
      v += delta[r * n + i];
      x[i] = v;
    }
    ss += v * v;
  }
  __shared__ float warp_sums[kThreads / 32];
  ss = WarpSum(ss);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
  const float scale = rsqrtf(total / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[r * n + i] = Bf16At(w, i) * (x[i] * scale);
}

}  // namespace

void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows,
                 int64_t n, float eps, cudaStream_t stream) {
  KERNEL_REQUIRE(out != residual);
  if (rows == 0) return;
  Launch(AddRmsnormKernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, out, residual, delta, w, n,
         eps);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
