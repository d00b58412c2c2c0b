#include "kernels/silu_mul.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"

namespace tandem::kernels {

namespace {
__global__ void SiluMulKernel(float* out, const float* gate_up, int64_t rows, int64_t n) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * n) return;
  const int64_t r = idx / n, i = idx % n;
  out[idx] = SiluF(gate_up[r * 2 * n + i]) * gate_up[r * 2 * n + n + i];
}
}  // namespace

void silu_mul(float* out, const float* gate_up, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows * n == 0) return;
  SiluMulKernel<<<static_cast<unsigned>((rows * n + 255) / 256), 256, 0, stream>>>(out, gate_up, rows, n);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
