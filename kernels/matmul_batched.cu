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

constexpr int kWarps = 8;  // the block's rows of W, k split eight ways

// Grid (ceil(out / (16 kGroups)), ceil(T / (8 kNTiles))). A block multiplies kGroups groups of 16
// rows, kLoads k steps in flight per warp (kGroups * kLoads = 4: 4 KB a warp either way). Two
// groups read the tokens' x (up to 32 x in floats, from L2) once for twice the rows of W: faster
// where the grid still fills the GPU, and at 8 tokens (launcher). No register cap: capped at 128
// (two blocks an SM) the sm_121 build spills 488 bytes with two groups; uncapped it takes 254
// registers and one block an SM, whose 32 KB in flight are far more than the GB10's ~6 GB/s an SM
// of DRAM bandwidth needs.
template <int kGroups>
__global__ void __launch_bounds__(kWarps * 32) MatmulBatchedKernel(float* y, const float* x, const uint16_t* w,
                                                                   int64_t T, int64_t in, int64_t out) {
  constexpr int kLoads = 4 / kGroups;
  __shared__ float sums[mma_rows::kSumFloats<kGroups, kWarps>];
  GridDepWait();  // x
  GridDepLaunchDependents();
  const mma_rows::BlockPlace at = mma_rows::PlaceOf<kGroups>();
  const uint16_t* rows[2 * kGroups];
  mma_rows::ForLaneRows<kGroups>(at, out, [&](int i, int64_t r) { rows[i] = w + r * in + 8 * at.c; });
  const float* xr[kNTiles];
  const int nt = mma_rows::TokenRows(xr, x, at.t0, T, in, at.lane);
  float acc[kGroups][kNTiles][4] = {};
  int64_t k_begin, k_end;
  WarpSlice<kWarps>(in, at.warp, &k_begin, &k_end);
  MmaRows<kGroups, kLoads, FloatRows>(acc, rows, xr, k_begin, k_end, 0, nt);
  SumWarps<kGroups, kWarps>(acc, sums, at.warp, at.lane);
  if (at.warp == 0) mma_rows::StoreRows<kGroups>(y, acc, at.r0, at.t0, T, out, at.lane);
}

}  // namespace

bool MatmulBatchedSupported(int64_t in, int64_t out) { return in > 0 && out > 0 && in % 32 == 0 && out % 16 == 0; }

// Two row groups a block where that still gives every SM a block (Qwen3-30B-A3B's q/k/v: 160
// blocks on the H200's 132 SMs), and for every product of a step of 8 tokens or fewer; else one
// (its o_proj from 9 tokens: 128 blocks, where two groups' 64 were slower alone and in the
// engine's batch 16-32 steps). H200, alone: q/k/v at 32 tokens 24.6 us with two against 35.9
// with one, o_proj 35.0 against 32.2. In the engine (docs/bench/decode-h200.md, session 20) a
// batch-8 step ran 10.65 ms with two groups for o_proj too against 10.96-10.99 with one (the 64
// blocks, slower alone, leave SMs to the next kernel's early start), batch 16 and 32 the reverse.
bool MatmulBatchedTwoGroups(int64_t T, int64_t out) { return out >= 32 && (out / 32 >= SmCount() || T <= 8); }

void matmul_batched(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                    cudaStream_t stream) {
  KERNEL_REQUIRE(MatmulBatchedSupported(in, out));
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  if (T == 0) return;
  const bool two = MatmulBatchedTwoGroups(T, out);
  Launch(two ? MatmulBatchedKernel<2> : MatmulBatchedKernel<1>, mma_rows::ProductGrid(T, out, two ? 2 : 1),
         dim3(kWarps * 32), 0, stream, y, x, reinterpret_cast<const uint16_t*>(w), T, in, out);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
