// Weight rows times a few token rows on bf16 tensor cores, for decode batches (moe_batched.cu,
// matmul_batched.cu): a warp holds 16 rows of W, a k step of 32 at a time, and multiplies them by
// up to kNTiles x 8 tokens (mma.sync m16n8k16, float accumulate). W is read once for all tokens.
//
// The lane (g = lane / 4, c = lane % 4) loads 16 bytes of weight rows g and g + 8 and of token g's
// row per k step: elements 8c..8c+7 of the step. mma k index 2c + j (j < 2) is element 8c + j,
// 2c + 8 + j is 8c + 2 + j, 16 + 2c + j is 8c + 4 + j, 24 + 2c + j is 8c + 6 + j: one permutation
// of k for the weights and the tokens alike, so the dot products are unchanged.
//
// The tokens' values enter as two bf16 parts, hi = bf16(v) and lo = bf16(v - hi), each multiplied
// by the (exact) bf16 weights: the products see the float32 activations to ~2^-16, as the
// matrix-vector kernels do, so a sequence's logits do not depend on the batch it runs in.
//
// Rows are few (16 per warp) and long, so the warps of a block share their 16 rows and split k
// (WarpSlice), then add their partial products in shared memory (SumWarps): enough warps stream
// at once even for a 2048 x 2048 product.
#pragma once

#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/mma_sync.cuh"

namespace tandem::kernels::mma_rows {

constexpr int kNTiles = 4;  // up to 32 tokens per pass

using kernels::Mma16816;  // mma_sync.cuh

// Splits elements (a, b) into the hi word and the lo word of a bf16 pair.
__device__ __forceinline__ void SplitPair(float a, float b, uint32_t& hi, uint32_t& lo) {
  hi = PackFloatsBf16(a, b);
  // A bf16 is the high 16 bits of the float of the same value.
  lo = PackFloatsBf16(a - __uint_as_float(hi << 16), b - __uint_as_float(hi & 0xffff0000u));
}

// Eight floats split into the hi and lo words of four bf16 pairs.
__device__ __forceinline__ void SplitEight(const float4& v0, const float4& v1, uint4& hi, uint4& lo) {
  SplitPair(v0.x, v0.y, hi.x, lo.x);
  SplitPair(v0.z, v0.w, hi.y, lo.y);
  SplitPair(v1.x, v1.y, hi.z, lo.z);
  SplitPair(v1.z, v1.w, hi.w, lo.w);
}

// The same, pairing elements (i, i + 4) instead of (2i, 2i + 1): the order in which NVFP4's codes
// widen most cheaply (quant_widen.cuh); weights and tokens pair alike.
__device__ __forceinline__ void SplitEightSpread(const float4& v0, const float4& v1, uint4& hi, uint4& lo) {
  SplitPair(v0.x, v1.x, hi.x, lo.x);
  SplitPair(v0.y, v1.y, hi.y, lo.y);
  SplitPair(v0.z, v1.z, hi.z, lo.z);
  SplitPair(v0.w, v1.w, hi.w, lo.w);
}

// Token rows in float32: the lane's 8 elements at k, split into hi and lo words.
struct FloatRows {
  using Elem = float;
  __device__ __forceinline__ static void Load(const float* p, int64_t k, int64_t /*lo_offset*/, uint4& hi, uint4& lo) {
    SplitEight(__ldg(reinterpret_cast<const float4*>(p + k)), __ldg(reinterpret_cast<const float4*>(p + k + 4)), hi,
               lo);
  }
};

// Token rows in float32 staged in shared memory (moe_batched.cu): as FloatRows, plain loads.
struct SharedFloatRows {
  using Elem = float;
  __device__ __forceinline__ static void Load(const float* p, int64_t k, int64_t /*lo_offset*/, uint4& hi, uint4& lo) {
    SplitEight(*reinterpret_cast<const float4*>(p + k), *reinterpret_cast<const float4*>(p + k + 4), hi, lo);
  }
};

// FloatRows and SharedFloatRows with the elements paired (i, i + 4) (SplitEightSpread).
struct FloatRowsSpread {
  using Elem = float;
  __device__ __forceinline__ static void Load(const float* p, int64_t k, int64_t /*lo_offset*/, uint4& hi, uint4& lo) {
    const float4 v0 = __ldg(reinterpret_cast<const float4*>(p + k)), v1 = __ldg(reinterpret_cast<const float4*>(p + k + 4));
    SplitEightSpread(v0, v1, hi, lo);
  }
};
struct SharedFloatRowsSpread {
  using Elem = float;
  __device__ __forceinline__ static void Load(const float* p, int64_t k, int64_t /*lo_offset*/, uint4& hi, uint4& lo) {
    const float4 v0 = *reinterpret_cast<const float4*>(p + k), v1 = *reinterpret_cast<const float4*>(p + k + 4);
    SplitEightSpread(v0, v1, hi, lo);
  }
};

// One k step: acc[m][j] += rows (a[2m], a[2m+1]) x token n-tile j, for the first nt n-tiles.
template <int M, typename Src>
__device__ __forceinline__ void MmaStep(float (&acc)[M][kNTiles][4], const uint4 (&a)[2 * M],
                                        const typename Src::Elem* const (&xr)[kNTiles], int64_t k,
                                        int64_t lo_offset, int nt) {
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    if (j >= nt) break;
    uint4 bh, bl;
    Src::Load(xr[j], k, lo_offset, bh, bl);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const uint4 r0 = a[2 * m], r8 = a[2 * m + 1];
      Mma16816(acc[m][j], r0.x, r8.x, r0.y, r8.y, bh.x, bh.y);
      Mma16816(acc[m][j], r0.z, r8.z, r0.w, r8.w, bh.z, bh.w);
      Mma16816(acc[m][j], r0.x, r8.x, r0.y, r8.y, bl.x, bl.y);
      Mma16816(acc[m][j], r0.z, r8.z, r0.w, r8.w, bl.z, bl.w);
    }
  }
}

// acc[m] += weight rows w[2m] (row g), w[2m+1] (row g + 8), already offset to the lane's 8c, times
// the token rows xr (offset likewise) over k in [k_begin, k_end), both multiples of 32: U k steps
// per round with all their 16-byte weight loads in flight together, then the remaining steps.
template <int M, int U, typename Src>
__device__ __forceinline__ void MmaRows(float (&acc)[M][kNTiles][4], const uint16_t* const (&w)[2 * M],
                                        const typename Src::Elem* const (&xr)[kNTiles], int64_t k_begin,
                                        int64_t k_end, int64_t lo_offset, int nt) {
  int64_t k = k_begin;
  for (; k + 32 * U <= k_end; k += 32 * U) {
    uint4 a[U][2 * M];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int r = 0; r < 2 * M; ++r) a[u][r] = __ldcs(reinterpret_cast<const uint4*>(w[r] + k + 32 * u));
    }
#pragma unroll
    for (int u = 0; u < U; ++u) MmaStep<M, Src>(acc, a[u], xr, k + 32 * u, lo_offset, nt);
  }
  for (; k < k_end; k += 32) {
    uint4 a[2 * M];
#pragma unroll
    for (int r = 0; r < 2 * M; ++r) a[r] = __ldcs(reinterpret_cast<const uint4*>(w[r] + k));
    MmaStep<M, Src>(acc, a, xr, k, lo_offset, nt);
  }
}

// The block's W warps each multiplied the same rows over their own slice of k: warp w's slice of
// a kdim-long row in whole steps of kStep columns (kdim % kStep == 0), possibly empty.
template <int W, int kStep = 32>
__device__ __forceinline__ void WarpSlice(int64_t kdim, int warp, int64_t* begin, int64_t* end) {
  const int64_t steps = kdim / kStep, per = (steps + W - 1) / W;
  *begin = min(steps, per * warp) * kStep;
  *end = min(steps, per * (warp + 1)) * kStep;
}

// Floats of shared memory SumWarps needs.
template <int M, int W>
constexpr int kSumFloats = W * M * kNTiles * 4 * 32;

// Adds the W warps' acc in warp order (a fixed order: the same bits every run) into warp 0's acc.
// Every thread of the block must call it (it has a barrier); afterwards only warp 0's acc is the sum.
template <int M, int W>
__device__ __forceinline__ void SumWarps(float (&acc)[M][kNTiles][4], float* smem, int warp, int lane) {
  constexpr int kVals = M * kNTiles * 4;
  float* mine = smem + warp * kVals * 32;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) mine[((m * kNTiles + j) * 4 + i) * 32 + lane] = acc[m][j][i];
    }
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float sum = 0.0f;
        for (int w = 0; w < W; ++w) sum += smem[(w * kVals + (m * kNTiles + j) * 4 + i) * 32 + lane];
        acc[m][j][i] = sum;
      }
    }
  }
}

// The first row of a block's row group m (groups of 16 from r0): a group past out (out % 16 == 0)
// reads group 0's rows instead, and StoreRows drops it.
__device__ __forceinline__ int64_t GroupFirstRow(int64_t r0, int m, int64_t out) {
  return r0 + 16 * m < out ? r0 + 16 * m : r0;
}

// Where a batched product's block and lane sit: lane and warp, the lane's place in the mma
// fragments (g = lane / 4, c = lane % 4), the block's first weight row r0 (blockIdx.x: kGroups
// groups of 16 rows a block) and first token t0 (blockIdx.y: kNTiles * 8 tokens a block).
struct BlockPlace {
  int lane, warp, g, c;
  int64_t r0, t0;
};

template <int kGroups>
__device__ __forceinline__ BlockPlace PlaceOf() {
  const int lane = static_cast<int>(threadIdx.x % 32);
  return {lane, static_cast<int>(threadIdx.x / 32), lane / 4, lane % 4,
          static_cast<int64_t>(blockIdx.x) * 16 * kGroups, static_cast<int64_t>(blockIdx.y) * 8 * kNTiles};
}

// f(i, r) for the lane's 2 kGroups weight rows: i = 2m + h is row g + 8h of group m (GroupFirstRow).
template <int kGroups, typename F>
__device__ __forceinline__ void ForLaneRows(const BlockPlace& at, int64_t out, F&& f) {
#pragma unroll
  for (int m = 0; m < kGroups; ++m) {
    const int64_t rg = GroupFirstRow(at.r0, m, out);
#pragma unroll
    for (int h = 0; h < 2; ++h) f(2 * m + h, rg + at.g + 8 * h);
  }
}

// acc[m][j] times a factor per row: factor[2m] for group m's row g (e in {0, 1}), factor[2m + 1] for
// its row g + 8 (NVFP4's row scales, applied to the finished sums).
template <int M>
__device__ __forceinline__ void ScaleRows(float (&acc)[M][kNTiles][4], const float (&factor)[2 * M]) {
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][j][e] *= factor[2 * m + e / 2];
    }
  }
}

// The grid of a product on these rows over `out` rows and T tokens: blocks of `groups` 16-row groups
// (x) by blocks of kNTiles * 8 tokens (y).
inline dim3 ProductGrid(int64_t T, int64_t out, int groups) {
  constexpr int64_t kTokens = 8 * kNTiles;
  KERNEL_REQUIRE((T + kTokens - 1) / kTokens <= 65535);
  return dim3(static_cast<unsigned>((out + 16 * groups - 1) / (16 * groups)),
              static_cast<unsigned>((T + kTokens - 1) / kTokens));
}

// The lane's token rows of the 32-token block from t0 (x rows of `in` floats), offset to its
// elements 8c: n-tile j's column g is token t0 + 8j + g; a column past T reads row t0 (its results
// are dropped). Returns the n-tiles that hold tokens.
__device__ __forceinline__ int TokenRows(const float* (&xr)[kNTiles], const float* x, int64_t t0, int64_t T,
                                         int64_t in, int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const int64_t t = t0 + 8 * j + g;
    xr[j] = x + (t < T ? t : t0) * in + 8 * c;
  }
  return static_cast<int>((min(T - t0, static_cast<int64_t>(8 * kNTiles)) + 7) / 8);
}

// y[t * out + r] for warp 0's summed acc (SumWarps) of M groups of 16 rows from r0 and the tokens
// from t0: acc[m][j] e in {0, 1} is (group row g, token 8j + 2c + e), e + 2 is (group row g + 8, the
// same token). Groups past out (out % 16 == 0) and tokens past T are dropped.
template <int M>
__device__ __forceinline__ void StoreRows(float* y, const float (&acc)[M][kNTiles][4], int64_t r0, int64_t t0,
                                          int64_t T, int64_t out, int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int64_t r = r0 + 16 * m + g;
    if (r0 + 16 * m >= out) break;
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t t = t0 + 8 * j + 2 * c + e;
        if (t >= T) continue;
        y[t * out + r] = acc[m][j][e];
        y[t * out + r + 8] = acc[m][j][e + 2];
      }
    }
  }
}

}  // namespace tandem::kernels::mma_rows
