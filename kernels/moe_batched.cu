#include "kernels/moe_batched.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma_rows.cuh"
#include "kernels/moe_pairs.cuh"

namespace tandem::kernels {

namespace {

using mma_rows::FloatRows;
using mma_rows::kNTiles;
using mma_rows::MmaRows;
using mma_rows::SumWarps;
using mma_rows::WarpSlice;

constexpr int kTileTokens = 8 * kNTiles;  // pairs per tile
constexpr int kWarps = 4;                 // the block's 16 rows (gate_up: and their 16 up rows), k split 4 ways

// The lane's token rows for its n-tiles: sorted slot tile.y + 8j + g, row `row_of(slot)`; a
// column past the tile reads the tile's first row (its results are dropped).
template <typename RowOf>
__device__ __forceinline__ void TileRows(const float* (&xr)[kNTiles], int4 tile, int g, int c, RowOf row_of) {
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const int n = 8 * j + g;
    xr[j] = row_of(tile.y + (n < tile.z ? n : 0)) + 8 * c;
  }
}

// Grid (tile bound, I / 16): act[p] (I floats) = silu(x_t W_gate^T) * (x_t W_up^T).
__global__ void __launch_bounds__(kWarps * 32) MoeBatchedGateUpKernel(float* act, const float* x,
                                                                      const int4* tiles, const int32_t* sorted,
                                                                      const uint16_t* gate_up, int64_t K, int64_t H,
                                                                      int64_t I) {
  __shared__ float sums[mma_rows::kSumFloats<2, kWarps>];
  GridDepWait();  // the sort (and the router before it)
  GridDepLaunchDependents();
  const int4 tile = tiles[blockIdx.x];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 16;
  if (tile.x < 0) return;  // past the last tile (the whole block)
  const uint16_t* we = gate_up + static_cast<int64_t>(tile.x) * 2 * I * H + 8 * c;
  const uint16_t* const w[4] = {we + (r0 + g) * H, we + (r0 + g + 8) * H, we + (I + r0 + g) * H,
                                we + (I + r0 + g + 8) * H};
  const float* xr[kNTiles];
  TileRows(xr, tile, g, c, [&](int slot) { return x + (sorted[slot] / K) * H; });
  float acc[2][kNTiles][4] = {};
  int64_t k_begin, k_end;
  WarpSlice<kWarps>(H, warp, &k_begin, &k_end);
  MmaRows<2, 2, FloatRows>(acc, w, xr, k_begin, k_end, 0, (tile.z + 7) / 8);
  SumWarps<2, kWarps>(acc, sums, warp, lane);
  if (warp != 0) return;
  // acc[m][j]: e in {0, 1} is (row g, token 8j + 2c + e), e + 2 is (row g + 8, the same token).
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = 8 * j + 2 * c + e;
      if (n >= tile.z) continue;
      float* dst = act + static_cast<int64_t>(sorted[tile.y + n]) * I + r0 + g;
      dst[0] = SiluF(acc[0][j][e]) * acc[1][j][e];
      dst[8] = SiluF(acc[0][j][e + 2]) * acc[1][j][e + 2];
    }
  }
}

// Grid (tile bound, H / 16): part[p] = weights[p] * (act[p] W_down[e]^T).
__global__ void __launch_bounds__(kWarps * 32) MoeBatchedDownKernel(float* part, const float* act,
                                                                    const int4* tiles, const int32_t* sorted,
                                                                    const float* weights, const uint16_t* down,
                                                                    int64_t H, int64_t I) {
  __shared__ float sums[mma_rows::kSumFloats<1, kWarps>];
  GridDepWait();  // act
  GridDepLaunchDependents();
  const int4 tile = tiles[blockIdx.x];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 16;
  if (tile.x < 0) return;
  const uint16_t* we = down + static_cast<int64_t>(tile.x) * H * I + 8 * c;
  const uint16_t* const w[2] = {we + (r0 + g) * I, we + (r0 + g + 8) * I};
  const float* xr[kNTiles];
  TileRows(xr, tile, g, c, [&](int slot) { return act + static_cast<int64_t>(sorted[slot]) * I; });
  float acc[1][kNTiles][4] = {};
  int64_t k_begin, k_end;
  WarpSlice<kWarps>(I, warp, &k_begin, &k_end);
  MmaRows<1, 4, FloatRows>(acc, w, xr, k_begin, k_end, 0, (tile.z + 7) / 8);
  SumWarps<1, kWarps>(acc, sums, warp, lane);
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = 8 * j + 2 * c + e;
      if (n >= tile.z) continue;
      const int64_t p = sorted[tile.y + n];
      const float wp = weights[p];
      part[p * H + r0 + g] = wp * acc[0][j][e];
      part[p * H + r0 + g + 8] = wp * acc[0][j][e + 2];
    }
  }
}

size_t Align256(size_t b) { return (b + 255) / 256 * 256; }

}  // namespace

bool MoeBatchedSupported(int64_t H, int64_t I) { return H > 0 && I > 0 && H % 32 == 0 && I % 32 == 0; }

size_t MoeBatchedScratchBytes(int64_t T, int64_t K, int64_t H, int64_t /*I*/) {
  return Align256(MoeSortBytes(T * K, kTileTokens)) + static_cast<size_t>(T * K * H) * sizeof(float);
}

void moe_batched(float* out, float* act, const float* x, const int32_t* ids, const float* weights,
                 const bf16_bits* gate_up, const bf16_bits* down, int64_t T, int64_t K, int64_t H, int64_t I,
                 void* scratch, cudaStream_t stream) {
  KERNEL_REQUIRE(MoeBatchedSupported(H, I));
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(scratch) % 16 == 0);
  if (T * K == 0) return;
  auto* base = static_cast<unsigned char*>(scratch);
  auto* part = reinterpret_cast<float*>(base + Align256(MoeSortBytes(T * K, kTileTokens)));
  const MoeSorted s = MoeSortPairs(base, ids, T * K, kTileTokens, stream);
  const auto tiles = static_cast<unsigned>(s.tile_bound);
  Launch(MoeBatchedGateUpKernel, dim3(tiles, static_cast<unsigned>(I / 16)),
         dim3(kWarps * 32), 0, stream, act, x, s.tiles, s.sorted, reinterpret_cast<const uint16_t*>(gate_up), K, H,
         I);
  KERNEL_CHECK();
  Launch(MoeBatchedDownKernel, dim3(tiles, static_cast<unsigned>(H / 16)),
         dim3(kWarps * 32), 0, stream, part, act, s.tiles, s.sorted, weights,
         reinterpret_cast<const uint16_t*>(down), H, I);
  KERNEL_CHECK();
  MoeReducePairs(out, part, T, K, H, stream);
}

}  // namespace tandem::kernels
