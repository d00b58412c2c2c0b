#include "kernels/rmsnorm.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kVecPerThread = 4;  // rows up to 256 * 4 * 4 = 4096 floats stay in registers

// One block per row: add, sum of squares (block reduction), scale. A row of up to 4096 floats is
// read with every load in flight at once (one memory round trip: at batch 1 this kernel is pure
// latency), its norm weights loaded before the wait for the previous kernel (they never change
// during a step); longer rows take the strided loop.
__global__ void __launch_bounds__(kThreads) AddRmsnormKernel(float* out, float* residual, const float* delta,
                                                             const uint16_t* w, int64_t n, float eps,
                                                             float w_offset) {
  // At the start, not after the wait: the next kernel's early loads (the quantized q/k/v product's
  // weights) are worth more than the round trip they delay here. Triggering after the wait lost,
  // batch 1 +3.2% to +3.6% FP8, +1.9% NVFP4, +0.7% to +0.9% bf16 (H100, session 51,
  // docs/bench/decode-h200.md).
  GridDepLaunchDependents();
  const int64_t r = blockIdx.x;
  float* x = residual + r * n;
  const float* d = delta != nullptr ? delta + r * n : nullptr;
  const bool vec = n % 4 == 0 && n <= 4 * kVecPerThread * kThreads && reinterpret_cast<uintptr_t>(residual) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(out) % 16 == 0 && reinterpret_cast<uintptr_t>(delta) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(w) % 8 == 0;
  uint2 wv[kVecPerThread] = {};  // bf16 weights 4i .. 4i + 3 of the thread's float4s
  if (vec) {
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
      const int64_t i = threadIdx.x + k * kThreads;
      if (i < n / 4) wv[k] = reinterpret_cast<const uint2*>(w)[i];
    }
  }
  GridDepWait();
  float ss = 0;
  float4 xv[kVecPerThread];
  if (vec) {
    const int64_t nv = n / 4;
    float4 dv[kVecPerThread];
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
      const int64_t i = threadIdx.x + k * kThreads;
      if (i < nv) {
        xv[k] = reinterpret_cast<const float4*>(x)[i];
        if (d != nullptr) dv[k] = reinterpret_cast<const float4*>(d)[i];
      }
    }
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
      const int64_t i = threadIdx.x + k * kThreads;
      if (i < nv) {
        if (d != nullptr) {
          xv[k].x += dv[k].x, xv[k].y += dv[k].y, xv[k].z += dv[k].z, xv[k].w += dv[k].w;
          reinterpret_cast<float4*>(x)[i] = xv[k];
        }
        ss += xv[k].x * xv[k].x + xv[k].y * xv[k].y + xv[k].z * xv[k].z + xv[k].w * xv[k].w;
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float v = x[i];
      if (d != nullptr) {
        v += d[i];
        x[i] = v;
      }
      ss += v * v;
    }
  }
  __shared__ float warp_sums[kThreads / 32];
  ss = WarpSum(ss);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
  const float scale = rsqrtf(total / static_cast<float>(n) + eps);
  if (vec) {
    const int64_t nv = n / 4;
#pragma unroll
    for (int k = 0; k < kVecPerThread; ++k) {
      const int64_t i = threadIdx.x + k * kThreads;
      if (i < nv) {
        const float2 w01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&wv[k].x));
        const float2 w23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&wv[k].y));
        float4 o;
        o.x = (w_offset + w01.x) * (xv[k].x * scale);
        o.y = (w_offset + w01.y) * (xv[k].y * scale);
        o.z = (w_offset + w23.x) * (xv[k].z * scale);
        o.w = (w_offset + w23.y) * (xv[k].w * scale);
        reinterpret_cast<float4*>(out + r * n)[i] = o;
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[r * n + i] = (w_offset + Bf16At(w, i)) * (x[i] * scale);
  }
}

}  // namespace

void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows,
                 int64_t n, float eps, cudaStream_t stream, float w_offset) {
  KERNEL_REQUIRE(out != residual);
  if (rows == 0) return;
  Launch(AddRmsnormKernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream, out, residual, delta, w, n,
         eps, w_offset);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
