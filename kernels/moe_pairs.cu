#include "kernels/moe_pairs.cuh"

#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/moe_gemm.h"

namespace tandem::kernels {

namespace {

constexpr int kSortThreads = 1024;
static_assert(kSortThreads == kMaxExperts, "the sort gives each thread one expert");

// Count per expert, exclusive scans of the counts and of the tiles, then the scatter.
__global__ void __launch_bounds__(kSortThreads) MoeSortKernel(int4* tiles, int32_t* sorted, const int32_t* ids,
                                                              int n_pairs, int tile_bound, int tile_rows,
                                                              int n_experts) {
  __shared__ int cursor[kMaxExperts];
  __shared__ int warp_sums[32];
  GridDepWait();  // the router's ids
  GridDepLaunchDependents();
  const int e = threadIdx.x;
  cursor[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < n_pairs; p += kSortThreads) {
    const int id = ids[p];
    if (id < 0 || id >= n_experts) __trap();  // a router bug: the tile table would overflow
    atomicAdd(&cursor[id], 1);
  }
  __syncthreads();
  const int count = cursor[e];
  int total_pairs, total_tiles;
  const int start = BlockExclusiveScan(count, warp_sums, &total_pairs);
  const int ntiles = (count + tile_rows - 1) / tile_rows;
  const int tile0 = BlockExclusiveScan(ntiles, warp_sums, &total_tiles);
  for (int j = 0; j < ntiles; ++j) {
    tiles[tile0 + j] = make_int4(e, start + j * tile_rows, min(tile_rows, count - j * tile_rows), 0);
  }
  for (int j = total_tiles + threadIdx.x; j < tile_bound; j += kSortThreads) tiles[j] = make_int4(-1, 0, 0, 0);
  cursor[e] = start;  // only thread e touches cursor[e] since the count was read
  __syncthreads();
  for (int p = threadIdx.x; p < n_pairs; p += kSortThreads) sorted[atomicAdd(&cursor[ids[p]], 1)] = p;
}

// Grid (ceil(H / 4 / 128), T), 128 threads.
__global__ void __launch_bounds__(128) MoeReduceKernel(float* out, const float* part, int64_t K, int64_t H) {
  GridDepWait();
  GridDepLaunchDependents();
  const int64_t h = (static_cast<int64_t>(blockIdx.x) * 128 + threadIdx.x) * 4;
  const int64_t t = blockIdx.y;
  if (h >= H) return;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int64_t k = 0; k < K; ++k) {
    const float4 v = *reinterpret_cast<const float4*>(part + (t * K + k) * H + h);
    s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
  }
  *reinterpret_cast<float4*>(out + t * H + h) = s;
}

}  // namespace

int64_t MoeTileBound(int64_t n_pairs, int tile_rows, int64_t n_experts) {
  return (n_pairs + tile_rows - 1) / tile_rows + std::min(n_pairs, n_experts);
}

size_t MoeSortBytes(int64_t n_pairs, int tile_rows) {
  return MoeTileBound(n_pairs, tile_rows, kMaxExperts) * sizeof(int4) + n_pairs * sizeof(int32_t);
}

MoeSorted MoeSortPairs(void* scratch, const int32_t* ids, int64_t n_pairs, int tile_rows, int64_t n_experts,
                       cudaStream_t stream) {
  KERNEL_REQUIRE(n_experts > 0 && n_experts <= kMaxExperts);
  const int64_t tile_bound = MoeTileBound(n_pairs, tile_rows, n_experts);
  auto* tiles = static_cast<int4*>(scratch);
  auto* sorted = reinterpret_cast<int32_t*>(tiles + tile_bound);
  Launch(MoeSortKernel, dim3(1), dim3(kSortThreads), 0, stream, tiles, sorted, ids, static_cast<int>(n_pairs),
         static_cast<int>(tile_bound), tile_rows, static_cast<int>(n_experts));
  KERNEL_CHECK();
  return {tiles, sorted, tile_bound};
}

void MoeReducePairs(float* out, const float* part, int64_t T, int64_t K, int64_t H, cudaStream_t stream) {
  Launch(MoeReduceKernel, dim3(static_cast<unsigned>((H / 4 + 127) / 128), static_cast<unsigned>(T)), dim3(128), 0,
         stream, out, part, K, H);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
