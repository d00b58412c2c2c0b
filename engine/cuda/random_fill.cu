#include "engine/cuda/random_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "kernels/cuda_check.h"

namespace tandem::engine::cuda {

namespace {

__device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i's random bits for `seed`.
__device__ __forceinline__ uint64_t RandomBits(uint64_t seed, int64_t i) {
  return SplitMix64(seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(i));
}

// Uniform in [0, 1) from the top 24 bits.
__device__ __forceinline__ float Unit(uint64_t r) { return static_cast<float>(r >> 40) * (1.0f / 16777216.0f); }

__global__ void FillRandomKernel(__nv_bfloat16* out, int64_t n, float scale, uint64_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16((2.0f * Unit(RandomBits(seed, i)) - 1.0f) * scale);
  }
}

__global__ void FillRandomE4m3Kernel(uint8_t* out, int64_t n, float lo, float hi, uint64_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = lo + (hi - lo) * Unit(RandomBits(seed, i));
    out[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  }
}

__global__ void FillRandomBytesKernel(uint8_t* out, int64_t n, uint64_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<uint8_t>(RandomBits(seed, i) >> 56);
  }
}

__global__ void FillConstantF32Kernel(float* out, int64_t n, float value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

__global__ void FillConstantKernel(__nv_bfloat16* out, int64_t n, float value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16(value);
  }
}

}  // namespace

void fill_random_e4m3(uint8_t* out, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  FillRandomE4m3Kernel<<<4096, 256, 0, stream>>>(out, n, lo, hi, seed);
  KERNEL_CHECK();
}

void fill_random_bytes(uint8_t* out, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  FillRandomBytesKernel<<<4096, 256, 0, stream>>>(out, n, seed);
  KERNEL_CHECK();
}

void fill_constant_f32(float* out, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  FillConstantF32Kernel<<<4096, 256, 0, stream>>>(out, n, value);
  KERNEL_CHECK();
}

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
