// The (token, expert) pair bookkeeping that the grouped MoE paths share (moe_gemm.cu for prefill,
// moe_batched.cu for decode batches): a sort of the pairs by expert into tiles of at most
// `tile_rows` pairs, and the fixed-order sum of each token's weighted expert rows.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace tandem::kernels {

// Tiles the sort may write for n_pairs pairs of ids in [0, n_experts): every expert's last tile may
// be partial, and at most n_experts experts have one.
int64_t MoeTileBound(int64_t n_pairs, int tile_rows, int64_t n_experts);
// Bytes of the tile table (int4 per tile) plus the sorted pair ids (int32 per pair), for any
// expert count up to kMaxExperts, plus the many-pair sort's counts (kMaxExperts int32 a block).
size_t MoeSortBytes(int64_t n_pairs, int tile_rows);

// Into `scratch` (MoeSortBytes, 16-byte aligned): tiles[j] = (expert, first sorted slot, pairs,
// 0) for j < the number of tiles, (-1, 0, 0, 0) after it up to MoeTileBound; sorted[slot] = pair
// id p = t*K + k, the pairs of one expert contiguous (their order within the expert arbitrary).
// Ids outside [0, n_experts) trap (n_experts <= kMaxExperts: the model's count bounds the tile
// table, so a decode batch's grids launch no more blocks than its experts can fill). Up to 4096
// pairs one block (a decode batch: one launch); more (prefill) in three launches, a block per 2048
// pairs counting, one block scanning, a block per 2048 pairs scattering. Launched with PDL (it
// waits for the router).
struct MoeSorted {
  const int4* tiles;
  const int32_t* sorted;
  int64_t tile_bound;
};
MoeSorted MoeSortPairs(void* scratch, const int32_t* ids, int64_t n_pairs, int tile_rows, int64_t n_experts,
                       cudaStream_t stream);

// out[t][h] = sum over k in order of part[t*K + k][h] (H a multiple of 4, rows 16-byte aligned).
void MoeReducePairs(float* out, const float* part, int64_t T, int64_t K, int64_t H, cudaStream_t stream);

}  // namespace tandem::kernels
