#include "kernels/embedding.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"

namespace tandem::kernels {

namespace {

// One block per token; each thread widens 8 bf16 (one 16-byte load).
__global__ void EmbeddingKernel(float* out, const int32_t* ids, const uint16_t* table, int64_t H) {
  const int64_t t = blockIdx.x;
  const uint16_t* row = table + static_cast<int64_t>(ids[t]) * H;
  for (int64_t i = threadIdx.x * 8; i < H; i += blockDim.x * 8) {
    float v[8];
    Load8Bf16(row + i, v);
    float4* o = reinterpret_cast<float4*>(out + t * H + i);
    o[0] = make_float4(v[0], v[1], v[2], v[3]);
    o[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

__global__ void GatherRowsKernel(float* out, const float* x, const int32_t* rows, int64_t H) {
  const int64_t r = blockIdx.x;
  const float* src = x + static_cast<int64_t>(rows[r]) * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) out[r * H + i] = src[i];
}

}  // namespace

void embedding(float* out, const int32_t* ids, const bf16_bits* table, int64_t T, int64_t H,
               cudaStream_t stream) {
  KERNEL_REQUIRE(H % 8 == 0);
  if (T == 0) return;
  EmbeddingKernel<<<T, 128, 0, stream>>>(out, ids, table, H);
  KERNEL_CHECK();
}

void gather_rows(float* out, const float* x, const int32_t* rows, int64_t R, int64_t H,
                 cudaStream_t stream) {
  if (R == 0) return;
  GatherRowsKernel<<<R, 256, 0, stream>>>(out, x, rows, H);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
