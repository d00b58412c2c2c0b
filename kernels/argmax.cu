#include "kernels/argmax.h"

#include <cfloat>

#include "kernels/cuda_check.h"

namespace tandem::kernels {

namespace {
constexpr int kThreads = 512;

__device__ __forceinline__ void Better(float& bv, int& bi, float v, int i) {
  if (v > bv || (v == bv && i < bi)) bv = v, bi = i;
}

__global__ void ArgmaxKernel(int32_t* out, const float* x, int64_t V) {
  const float* row = x + static_cast<int64_t>(blockIdx.x) * V;
  float bv = -FLT_MAX;
  int bi = 0x7fffffff;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) Better(bv, bi, row[v], static_cast<int>(v));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Better(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
  }
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  if (threadIdx.x % 32 == 0) sv[threadIdx.x / 32] = bv, si[threadIdx.x / 32] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) Better(bv, bi, sv[w], si[w]);
    out[blockIdx.x] = bi;
  }
}
}  // namespace

void argmax(int32_t* out, const float* x, int64_t R, int64_t V, cudaStream_t stream) {
  if (R == 0) return;
  ArgmaxKernel<<<static_cast<unsigned>(R), kThreads, 0, stream>>>(out, x, V);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
