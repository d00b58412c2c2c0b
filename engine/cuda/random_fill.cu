#include "engine/cuda/random_fill.h"

#include <cuda_bf16.h>

#include "kernels/cuda_check.h"

namespace tandem::engine::cuda {

namespace {

__device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void FillRandomKernel(__nv_bfloat16* out, int64_t n, float scale, uint64_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = SplitMix64(seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(i));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

__global__ void FillConstantKernel(__nv_bfloat16* out, int64_t n, float value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16(value);
  }
}

}  // namespace

void fill_random_bf16(kernels::bf16_bits* out, int64_t n, float scale, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  FillRandomKernel<<<4096, 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), n, scale, seed);
  KERNEL_CHECK();
}

void fill_constant_bf16(kernels::bf16_bits* out, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  FillConstantKernel<<<4096, 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), n, value);
  KERNEL_CHECK();
}

}  // namespace tandem::engine::cuda
