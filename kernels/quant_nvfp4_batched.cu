// NVFP4 products of decode batches on the bf16 tensor cores (quant_fp8_batched.cu's design,
// kernels/mma_rows.cuh): a warp holds 16 rows of W and multiplies them by up to 32 tokens, so W is
// read once per 32 tokens, where the token-tile kernels of quant_nvfp4.cu read it once per 8 and
// load float32 x for every weight (L1-bound, as FP8's were).
//
// A lane takes 8 bytes of a row at a time: 16 codes, one whole 16-group with its one scale byte.
// Of a 64-column span, lane c holds columns 16c .. 16c + 15: the first mma step takes 16c .. 16c + 7
// and the second 16c + 8 .. 16c + 15 (each step's four lanes cover 32 distinct columns; the tokens
// are read at the same columns, so the sums are unchanged). Each code times its group scale is
// exact in bf16 (quant_widen.cuh, times 2^-14), pairing columns (i, i + 4) as the tokens do
// (mma_rows::FloatRowsSpread); the row's second scale and the 2^14 multiply the finished sums.
// Takes cols % 64 == 0 and rows % 16 == 0 (Qwen3-30B-A3B's and Qwen3.5's products and their TP
// shards), else the caller keeps the token tiles.
#include "kernels/cuda_check.h"
#include "kernels/launch.cuh"
#include "kernels/matmul_batched.h"
#include "kernels/mma_rows.cuh"
#include "kernels/quant_detail.h"
#include "kernels/quant_widen.cuh"

namespace tandem::kernels::detail {

namespace {

using mma_rows::FloatRowsSpread;
using mma_rows::kNTiles;
using mma_rows::MmaStep;
using mma_rows::SumWarps;
using mma_rows::WarpSlice;

constexpr int kWarps = 8;  // the block's rows of W, k split eight ways
constexpr int kSpan = 64;  // columns a lane's 8-byte load belongs to (two mma steps)

// Grid (ceil(out / (16 kGroups)), ceil(T / (8 kNTiles))), as MatmulBatchedKernel. A warp walks its
// slice of k in rounds of kSpans spans with every load of a round in flight.
template <int kGroups>
__global__ void __launch_bounds__(kWarps * 32)
    MatmulNvfp4BatchedKernel(float* y, const float* x, const uint8_t* w, const uint8_t* group_scales,
                             const float* row_scale2, int64_t cols, int64_t T, int64_t out) {
  constexpr int kSpans = 2 / kGroups;
  __shared__ float sums[mma_rows::kSumFloats<kGroups, kWarps>];
  GridDepWait();  // x
  GridDepLaunchDependents();
  const mma_rows::BlockPlace at = mma_rows::PlaceOf<kGroups>();
  const uint8_t* rows[2 * kGroups];
  const uint8_t* srows[2 * kGroups];
  float factor[2 * kGroups];
  mma_rows::ForLaneRows<kGroups>(at, out, [&](int i, int64_t r) {
    rows[i] = w + r * (cols / 2) + 8 * at.c;
    srows[i] = group_scales + r * (cols / 16) + at.c;
    factor[i] = __ldg(row_scale2 + r) * 16384.0f;
  });
  const float* xr[kNTiles];
  const int nt = mma_rows::TokenRows(xr, x, at.t0, T, cols, at.lane);
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) xr[j] += 8 * at.c;  // TokenRows offsets by 8c; a lane's span starts at 16c
  float acc[kGroups][kNTiles][4] = {};
  int64_t k_begin, k_end;
  WarpSlice<kWarps, kSpan>(cols, at.warp, &k_begin, &k_end);
  for (int64_t k = k_begin; k < k_end; k += kSpan * kSpans) {
    uint2 raw[kSpans][2 * kGroups];
    uint32_t sc[kSpans][2 * kGroups];
#pragma unroll
    for (int u = 0; u < kSpans; ++u) {
      if (k + kSpan * u >= k_end) break;
#pragma unroll
      for (int r = 0; r < 2 * kGroups; ++r) {
        raw[u][r] = __ldcs(reinterpret_cast<const uint2*>(rows[r] + (k + kSpan * u) / 2));
        sc[u][r] = __ldg(srows[r] + (k + kSpan * u) / 16);
      }
    }
#pragma unroll
    for (int u = 0; u < kSpans; ++u) {
      if (k + kSpan * u >= k_end) break;
      uint4 a[2 * kGroups];
#pragma unroll
      for (int r = 0; r < 2 * kGroups; ++r) a[r] = Nvfp4EightToBf16(raw[u][r].x, sc[u][r]);
      MmaStep<kGroups, FloatRowsSpread>(acc, a, xr, k + kSpan * u, 0, nt);
#pragma unroll
      for (int r = 0; r < 2 * kGroups; ++r) a[r] = Nvfp4EightToBf16(raw[u][r].y, sc[u][r]);
      MmaStep<kGroups, FloatRowsSpread>(acc, a, xr, k + kSpan * u + 8, 0, nt);
    }
  }
  SumWarps<kGroups, kWarps>(acc, sums, at.warp, at.lane);
  if (at.warp != 0) return;
  mma_rows::ScaleRows<kGroups>(acc, factor);
  mma_rows::StoreRows<kGroups>(y, acc, at.r0, at.t0, T, out, at.lane);
}

}  // namespace

bool matmul_nvfp4_batched(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream) {
  KERNEL_REQUIRE(W.format == WeightFormat::kNvfp4 && W.count == 1);
  if (W.cols % kSpan != 0 || W.rows % 16 != 0 || W.rows == 0 || reinterpret_cast<uintptr_t>(W.data) % 8 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return false;
  }
  if (T == 0) return true;
  const bool two = MatmulBatchedTwoGroups(T, W.rows);
  Launch(two ? MatmulNvfp4BatchedKernel<2> : MatmulNvfp4BatchedKernel<1>, mma_rows::ProductGrid(T, W.rows, two ? 2 : 1),
         dim3(kWarps * 32), 0, stream, y, x, static_cast<const uint8_t*>(W.data), W.group_scales, W.row_scale2,
         W.cols, T, W.rows);
  KERNEL_CHECK();
  return true;
}

}  // namespace tandem::kernels::detail
