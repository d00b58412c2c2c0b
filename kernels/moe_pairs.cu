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
// Up to this many pairs one block sorts them (decode batches: one launch, latency-bound); more
// (prefill) are counted and scattered by blocks of kSortBlockPairs each. One block over the 65536
// pairs of an 8 x 1024-token prefill took 88 us (its shared-memory atomics on the hot experts'
// counters in a row), twice a layer.
constexpr int64_t kOneBlockSortMaxPairs = 4096;
constexpr int kSortBlockPairs = 2048;

int SortBlocks(int64_t n_pairs) {
  return n_pairs <= kOneBlockSortMaxPairs ? 0 : static_cast<int>((n_pairs + kSortBlockPairs - 1) / kSortBlockPairs);
}

// Thread e (an expert) of a block of kSortThreads: the tile table's entries of an expert with
// `count` pairs from sorted slot `start`, and (-1, 0, 0, 0) from the table's end to tile_bound.
// Returns start.
__device__ __forceinline__ int WriteTiles(int4* tiles, int count, int* warp_sums, int tile_bound, int tile_rows) {
  const int e = threadIdx.x;
  int total_pairs, total_tiles;
  const int start = BlockExclusiveScan(count, warp_sums, &total_pairs);
  const int ntiles = (count + tile_rows - 1) / tile_rows;
  const int tile0 = BlockExclusiveScan(ntiles, warp_sums, &total_tiles);
  for (int j = 0; j < ntiles; ++j) {
    tiles[tile0 + j] = make_int4(e, start + j * tile_rows, min(tile_rows, count - j * tile_rows), 0);
  }
  for (int j = total_tiles + threadIdx.x; j < tile_bound; j += kSortThreads) tiles[j] = make_int4(-1, 0, 0, 0);
  return start;
}

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
  cursor[e] = WriteTiles(tiles, count, warp_sums, tile_bound, tile_rows);  // only thread e touches cursor[e]
  __syncthreads();
  for (int p = threadIdx.x; p < n_pairs; p += kSortThreads) sorted[atomicAdd(&cursor[ids[p]], 1)] = p;
}

// The sort of many pairs in three launches. 1: block b counts its kSortBlockPairs pairs' experts
// into counts[b][e] (every one of kMaxExperts).
__global__ void __launch_bounds__(kSortThreads) MoeCountKernel(int32_t* counts, const int32_t* ids, int n_pairs,
                                                               int n_experts) {
  __shared__ int hist[kMaxExperts];
  GridDepWait();  // the router's ids
  GridDepLaunchDependents();
  hist[threadIdx.x] = 0;
  __syncthreads();
  const int p0 = blockIdx.x * kSortBlockPairs, p1 = min(n_pairs, p0 + kSortBlockPairs);
  for (int p = p0 + threadIdx.x; p < p1; p += kSortThreads) {
    const int id = ids[p];
    if (id < 0 || id >= n_experts) __trap();  // a router bug: the tile table would overflow
    atomicAdd(&hist[id], 1);
  }
  __syncthreads();
  counts[blockIdx.x * kMaxExperts + threadIdx.x] = hist[threadIdx.x];
}

// 2: one block, thread e: expert e's total over the blocks, the tile table, and counts[b][e]
// replaced by the sorted slot of block b's first pair of expert e.
__global__ void __launch_bounds__(kSortThreads) MoeScanKernel(int4* tiles, int32_t* counts, int n_blocks,
                                                              int tile_bound, int tile_rows) {
  __shared__ int warp_sums[32];
  GridDepWait();
  GridDepLaunchDependents();
  const int e = threadIdx.x;
  int count = 0;
  for (int b = 0; b < n_blocks; ++b) count += counts[b * kMaxExperts + e];
  int slot = WriteTiles(tiles, count, warp_sums, tile_bound, tile_rows);
  for (int b = 0; b < n_blocks; ++b) {
    const int c = counts[b * kMaxExperts + e];
    counts[b * kMaxExperts + e] = slot;
    slot += c;
  }
}

// 3: block b scatters its pairs from its slots.
__global__ void __launch_bounds__(kSortThreads) MoeScatterKernel(int32_t* sorted, const int32_t* ids,
                                                                 const int32_t* slots, int n_pairs) {
  __shared__ int cursor[kMaxExperts];
  GridDepWait();
  GridDepLaunchDependents();
  cursor[threadIdx.x] = slots[blockIdx.x * kMaxExperts + threadIdx.x];
  __syncthreads();
  const int p0 = blockIdx.x * kSortBlockPairs, p1 = min(n_pairs, p0 + kSortBlockPairs);
  for (int p = p0 + threadIdx.x; p < p1; p += kSortThreads) sorted[atomicAdd(&cursor[ids[p]], 1)] = p;
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
  return MoeTileBound(n_pairs, tile_rows, kMaxExperts) * sizeof(int4) + n_pairs * sizeof(int32_t) +
         static_cast<size_t>(SortBlocks(n_pairs)) * kMaxExperts * sizeof(int32_t);
}

MoeSorted MoeSortPairs(void* scratch, const int32_t* ids, int64_t n_pairs, int tile_rows, int64_t n_experts,
                       cudaStream_t stream) {
  KERNEL_REQUIRE(n_experts > 0 && n_experts <= kMaxExperts && n_pairs <= INT32_MAX);
  const int64_t tile_bound = MoeTileBound(n_pairs, tile_rows, n_experts);
  auto* tiles = static_cast<int4*>(scratch);
  auto* sorted = reinterpret_cast<int32_t*>(tiles + tile_bound);
  const int n = static_cast<int>(n_pairs), bound = static_cast<int>(tile_bound), ne = static_cast<int>(n_experts);
  if (const int blocks = SortBlocks(n_pairs); blocks == 0) {
    Launch(MoeSortKernel, dim3(1), dim3(kSortThreads), 0, stream, tiles, sorted, ids, n, bound, tile_rows, ne);
  } else {
    int32_t* counts = sorted + n_pairs;
    Launch(MoeCountKernel, dim3(blocks), dim3(kSortThreads), 0, stream, counts, ids, n, ne);
    Launch(MoeScanKernel, dim3(1), dim3(kSortThreads), 0, stream, tiles, counts, blocks, bound, tile_rows);
    Launch(MoeScatterKernel, dim3(blocks), dim3(kSortThreads), 0, stream, sorted, ids,
           static_cast<const int32_t*>(counts), n);
  }
  KERNEL_CHECK();
  return {tiles, sorted, tile_bound};
}

void MoeReducePairs(float* out, const float* part, int64_t T, int64_t K, int64_t H, cudaStream_t stream) {
  Launch(MoeReduceKernel, dim3(static_cast<unsigned>((H / 4 + 127) / 128), static_cast<unsigned>(T)), dim3(128), 0,
         stream, out, part, K, H);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
