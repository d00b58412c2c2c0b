#include "kernels/matmul_batched.h"

#include "kernels/cuda_check.h"
#include "kernels/launch.cuh"
#include "kernels/mma_rows.cuh"

namespace tandem::kernels {

namespace {

using mma_rows::FloatRows;
using mma_rows::kNTiles;
using mma_rows::MmaRows;

using mma_rows::SumWarps;
using mma_rows::WarpSlice;

constexpr int kWarps = 8;  // the block's 16 rows of W, k split eight ways
constexpr int kLoads = 4;  // k steps in flight per warp
constexpr int kBlockTokens = 8 * kNTiles;

// Grid (out / 16, ceil(T / kBlockTokens)).
__global__ void __launch_bounds__(kWarps * 32) MatmulBatchedKernel(float* y, const float* x, const uint16_t* w,
                                                                   int64_t T, int64_t in, int64_t out) {
  __shared__ float sums[mma_rows::kSumFloats<1, kWarps>];
  GridDepWait();  // x
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kBlockTokens;
  const uint16_t* const rows[2] = {w + (r0 + g) * in + 8 * c, w + (r0 + g + 8) * in + 8 * c};
  const float* xr[kNTiles];
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {  // a column past T reads row t0 (its results are dropped)
    const int64_t t = t0 + 8 * j + g;
    xr[j] = x + (t < T ? t : t0) * in + 8 * c;
  }
  const int nt = static_cast<int>((min(T - t0, static_cast<int64_t>(kBlockTokens)) + 7) / 8);
  float acc[1][kNTiles][4] = {};
  int64_t k_begin, k_end;
  WarpSlice<kWarps>(in, warp, &k_begin, &k_end);
  MmaRows<1, kLoads, FloatRows>(acc, rows, xr, k_begin, k_end, 0, nt);
  SumWarps<1, kWarps>(acc, sums, warp, lane);
  if (warp != 0) return;
  // acc[0][j]: e in {0, 1} is (row g, token 8j + 2c + e), e + 2 is (row g + 8, the same token).
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t t = t0 + 8 * j + 2 * c + e;
      if (t >= T) continue;
      y[t * out + r0 + g] = acc[0][j][e];
      y[t * out + r0 + g + 8] = acc[0][j][e + 2];
    }
  }
}

}  // namespace

bool MatmulBatchedSupported(int64_t in, int64_t out) { return in > 0 && out > 0 && in % 32 == 0 && out % 16 == 0; }

void matmul_batched(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                    cudaStream_t stream) {
  KERNEL_REQUIRE(MatmulBatchedSupported(in, out));
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  if (T == 0) return;
  const dim3 grid(static_cast<unsigned>(out / 16),
                  static_cast<unsigned>((T + kBlockTokens - 1) / kBlockTokens));
  Launch(MatmulBatchedKernel, grid, dim3(kWarps * 32), 0, stream, y, x, reinterpret_cast<const uint16_t*>(w), T, in,
         out);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
