// Block-scaled FP8 products of decode batches on the bf16 tensor cores (matmul_batched.cu's design,
// kernels/mma_rows.cuh): a warp holds 16 rows of W a k step of 32 at a time and multiplies them by
// up to 32 tokens, so W is read once per 32 tokens instead of once per 8 (the token-tile kernels of
// quant_fp8.cu, whose float32 x loads, 8 tokens x 4 bytes per weight over 4 rows, bound them by L1:
// Qwen3-30B-A3B's o_proj at 8 tokens took 48.5 us alone against bf16's 15.0 on the tensor cores).
//
// Every e4m3 value is a bf16 value (3 mantissa bits, exponents 2^-9 .. 2^8), so a weight enters the
// mma exactly; the tokens enter as bf16 hi + lo as in matmul_batched (~2^-16 of float32). A 128 x
// 128 scale block's products are summed on their own and scaled once in float32 (the scale of row
// g and of row g + 8 each), which needs the k steps of 32 not to straddle a block: block_in a power
// of two >= 32 and col_phase % 32 == 0 (every real checkpoint, TP shards included), else the caller
// keeps the token-tile kernels.
#include "kernels/cuda_check.h"
#include "kernels/launch.cuh"
#include "kernels/matmul_batched.h"
#include "kernels/mma_rows.cuh"
#include "kernels/quant_detail.h"
#include "kernels/quant_fp8.cuh"
#include "kernels/quant_widen.cuh"

namespace tandem::kernels::detail {

namespace {

using mma_rows::FloatRows;
using mma_rows::kNTiles;
using mma_rows::MmaStep;
using mma_rows::SumWarps;
using mma_rows::WarpSlice;

constexpr int kWarps = 8;  // the block's rows of W, k split eight ways

struct BatchedGeometry {
  int64_t cols = 0, scale_cols = 0, row_block = 1;
  int32_t col_phase = 0, shift = 0;  // block_in = 1 << shift
};

// Grid (ceil(out / (16 kGroups)), ceil(T / (8 kNTiles))), as MatmulBatchedKernel. A warp walks its
// slice of k one scale block at a time: the block's steps in rounds of kLoads with every weight
// load of a round in flight, the products into `part`, then acc += scale * part per row.
template <int kGroups>
__global__ void __launch_bounds__(kWarps * 32)
    MatmulFp8BatchedKernel(float* y, const float* x, const uint8_t* w, const float* scales, BatchedGeometry g,
                           int64_t T, int64_t out) {
  constexpr int kLoads = 4 / kGroups;
  __shared__ float sums[mma_rows::kSumFloats<kGroups, kWarps>];
  GridDepWait();  // x
  GridDepLaunchDependents();
  const mma_rows::BlockPlace at = mma_rows::PlaceOf<kGroups>();
  const uint8_t* rows[2 * kGroups];
  const float* srows[2 * kGroups];
  mma_rows::ForLaneRows<kGroups>(at, out, [&](int i, int64_t r) {
    rows[i] = w + r * g.cols + 8 * at.c;
    srows[i] = scales + (r / g.row_block) * g.scale_cols;
  });
  const float* xr[kNTiles];
  const int nt = mma_rows::TokenRows(xr, x, at.t0, T, g.cols, at.lane);
  float acc[kGroups][kNTiles][4] = {};
  int64_t k_begin, k_end;
  WarpSlice<kWarps>(g.cols, at.warp, &k_begin, &k_end);
  for (int64_t k = k_begin; k < k_end;) {
    const int64_t blk = (k + g.col_phase) >> g.shift;
    const int64_t next = ((blk + 1) << g.shift) - g.col_phase;
    const int64_t kb_end = next < k_end ? next : k_end;
    float part[kGroups][kNTiles][4] = {};
    for (; k < kb_end; k = k + 32 * kLoads < kb_end ? k + 32 * kLoads : kb_end) {
      uint2 raw[kLoads][2 * kGroups];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        if (k + 32 * u >= kb_end) break;
#pragma unroll
        for (int r = 0; r < 2 * kGroups; ++r) raw[u][r] = __ldcs(reinterpret_cast<const uint2*>(rows[r] + k + 32 * u));
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        if (k + 32 * u >= kb_end) break;
        uint4 a[2 * kGroups];
#pragma unroll
        for (int r = 0; r < 2 * kGroups; ++r) a[r] = Fp8EightToBf16(raw[u][r]);
        MmaStep<kGroups, FloatRows>(part, a, xr, k + 32 * u, 0, nt);
      }
    }
#pragma unroll
    for (int m = 0; m < kGroups; ++m) {
      const float s0 = __ldg(srows[2 * m] + blk), s8 = __ldg(srows[2 * m + 1] + blk);
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        acc[m][j][0] = fmaf(s0, part[m][j][0], acc[m][j][0]);
        acc[m][j][1] = fmaf(s0, part[m][j][1], acc[m][j][1]);
        acc[m][j][2] = fmaf(s8, part[m][j][2], acc[m][j][2]);
        acc[m][j][3] = fmaf(s8, part[m][j][3], acc[m][j][3]);
      }
    }
  }
  SumWarps<kGroups, kWarps>(acc, sums, at.warp, at.lane);
  if (at.warp == 0) mma_rows::StoreRows<kGroups>(y, acc, at.r0, at.t0, T, out, at.lane);
}

}  // namespace

bool matmul_fp8_batched(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream) {
  KERNEL_REQUIRE(W.format == WeightFormat::kFp8Block && W.count == 1);
  const int32_t shift = W.block_shift(32);
  if (shift < 0 || W.cols % 32 != 0 || W.rows % 16 != 0 || W.rows == 0 ||
      reinterpret_cast<uintptr_t>(W.data) % 8 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return false;
  }
  if (T == 0) return true;
  BatchedGeometry g;
  g.cols = W.cols;
  g.scale_cols = W.scale_cols();
  g.row_block = W.row_block;
  g.col_phase = static_cast<int32_t>(W.col_phase);
  g.shift = shift;
  const bool two = MatmulBatchedTwoGroups(T, W.rows);
  Launch(two ? MatmulFp8BatchedKernel<2> : MatmulFp8BatchedKernel<1>, mma_rows::ProductGrid(T, W.rows, two ? 2 : 1),
         dim3(kWarps * 32), 0, stream, y, x, static_cast<const uint8_t*>(W.data), W.scales, g, T, W.rows);
  KERNEL_CHECK();
  return true;
}

}  // namespace tandem::kernels::detail
