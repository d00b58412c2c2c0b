// The decode-batch expert kernel of moe_batched.h, one template over the experts' weight format:
// bf16 (moe_batched.cu) and the quantized stacks (quant_moe_batched.cu, FP8 block-scaled and NVFP4).
// A format is a `Tiles` policy that says how many bytes a staged weight row takes per chunk of k,
// where its 16-byte pieces go in shared memory, and how a lane widens its 8 weights of a k step to
// the four bf16 pairs the mma takes (exactly: every e4m3 value is a bf16 value, and so is an e2m1
// code times its e4m3 group scale). Scales that do not fit in the widened weights are applied in
// float32: FP8's per block to each block's partial sums (at the chunk that ends the block, or at the
// k step where blocks end inside chunks), NVFP4's per row to the result.
#pragma once

#include <cstdint>

#include "kernels/cp_async.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma_rows.cuh"
#include "kernels/moe_pairs.cuh"

namespace tandem::kernels::moe_batched_detail {

using mma_rows::kNTiles;

constexpr int kTileTokens = 8 * kNTiles;      // pairs per tile (the sort's tile rows)
constexpr int kWarps = 4;                     // a warp owns two 16-row groups of the staged rows
constexpr int kThreads = kWarps * 32;
constexpr int kStagedRows = kWarps * 2 * 16;  // weight rows a block stages: 128
constexpr int kChunk = 64;                    // k elements per stage
constexpr int kXStride = kChunk + 4;          // floats per staged token row: 272 bytes (rows g, g + 1 16 bytes apart in the banks)
constexpr int kXStageFloats = kTileTokens * kXStride;

// Shared memory of one stage and of the ring for a format (Tiles::kStages stages: kStages - 1 chunks
// in flight while one is used).
template <typename Tiles>
constexpr int kStageBytes = kStagedRows * (Tiles::kRowBytes + Tiles::kScaleBytes) + kXStageFloats * 4;
template <typename Tiles>
constexpr int kSmemBytes = Tiles::kStages * kStageBytes<Tiles>;

// Which weight row the block stages as its row rr (0 <= rr < 128), or -1 past the matrix.
// gate_up (kGateUp): warp w = rr / 32 owns the 16 gate rows r0 + 16w + i (group 0) and the
// matching up rows I + r0 + 16w + i (group 1), so a block yields 64 act values a pair; down: rows
// r0 + rr, 128 outputs a pair.
template <bool kGateUp>
__device__ __forceinline__ int64_t StagedRow(int rr, int64_t r0, int64_t out_rows) {
  if constexpr (kGateUp) {
    const int64_t r = r0 + 16 * (rr / 32) + rr % 16;
    return r < out_rows ? r + ((rr / 16) % 2) * out_rows : -1;
  } else {
    const int64_t r = r0 + rr;
    return r < out_rows ? r : -1;
  }
}

// The launch's arguments besides the activations: the sorted pairs and the expert stack (its
// format's fields in `w`).
template <typename Tiles>
struct Args {
  float* out;
  const float* x;
  const int4* tiles;
  const int32_t* sorted;
  const float* weights;  // down only: the pairs' router weights
  typename Tiles::Stack w;
  int64_t K, out_rows, kdim;
};

// Grid (tile bound, ceil(out_rows / (kGateUp ? 64 : 128))), kThreads threads, kSmemBytes<Tiles>.
// The block streams its expert's 128 staged rows through a ring of Tiles::kStages shared-memory stages with
// cp.async, kChunk of k at a time, together with the same k of its tile's token rows; each warp
// widens its two 16-row groups to bf16 and multiplies them by the tile's tokens on tensor cores
// (mma_rows.cuh). Each output is one warp's sum over k in order: deterministic.
//   gate_up: x = token rows (H floats, token = pair / K), w (E, 2I, H), out = act: act[p] (I) =
//            silu(x W_gate^T) * (x W_up^T).
//   down:    x = act rows (I floats), w (E, H, I), out = part: part[p] (H) = weights[p] * (act[p] W^T).
template <bool kGateUp, typename Tiles>
__global__ void __launch_bounds__(kThreads) MoeBatchedKernel(const Args<Tiles> a) {
  constexpr int kStages = Tiles::kStages;
  extern __shared__ __align__(16) unsigned char smem[];
  GridDepWait();  // the sort (gate_up) or act (down)
  GridDepLaunchDependents();
  const int4 tile = a.tiles[blockIdx.x];
  if (tile.x < 0) return;  // past the last tile (the whole block)
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, c = lane % 4;
  constexpr int kOutPerBlock = kGateUp ? kStagedRows / 2 : kStagedRows;
  constexpr int kPieces = Tiles::kRowBytes / 16;  // 16-byte pieces of a staged weight row
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kOutPerBlock;
  const int64_t rows = (kGateUp ? 2 : 1) * a.out_rows, kdim = a.kdim;
  const typename Tiles::Expert ex = Tiles::ExpertOf(a.w, tile.x, rows, kdim);
  const int nt = (tile.z + 7) / 8;  // n-tiles of 8 tokens; columns past tile.z repeat the first pair
  const int64_t chunks = (kdim + kChunk - 1) / kChunk;

  // This thread's copies: weight piece tid % kPieces of staged rows tid / kPieces + (128 / kPieces) j,
  // and 16-byte piece tid % 16 of token rows tid / 16 + 8j.
  const int wpiece = tid % kPieces, xpiece = tid % (kChunk / 4);
  const float* xsrc[kNTiles];
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const int n = tid / (kChunk / 4) + 8 * j;
    const int64_t p = a.sorted[tile.y + (n < tile.z ? n : 0)];
    xsrc[j] = a.x + (kGateUp ? p / a.K : p) * kdim + 4 * xpiece;
  }
  auto stage_w = [&](int slot) { return smem + slot * kStageBytes<Tiles>; };
  auto stage_s = [&](int slot) { return smem + slot * kStageBytes<Tiles> + kStagedRows * Tiles::kRowBytes; };
  auto stage_x = [&](int slot) {
    return reinterpret_cast<float*>(smem + slot * kStageBytes<Tiles> + kStagedRows * (Tiles::kRowBytes + Tiles::kScaleBytes));
  };
  auto issue = [&](int64_t q, int slot) {
    const int64_t k0 = q * kChunk;
    unsigned char* sw = stage_w(slot);
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      const int rr = tid / kPieces + (kThreads / kPieces) * j;
      const int64_t row = StagedRow<kGateUp>(rr, r0, a.out_rows);
      const bool ok = row >= 0 && k0 + Tiles::kPieceElems * wpiece < kdim;
      CpAsync16(SmemAddr(sw + rr * Tiles::kRowBytes + (wpiece ^ Tiles::Swizzle(rr)) * 16),
                ok ? Tiles::PieceAddr(ex, row, kdim, k0, wpiece) : Tiles::PieceAddr(ex, 0, kdim, 0, 0), ok);
    }
    if constexpr (Tiles::kScaleBytes > 0) {  // one copy a staged row (kThreads == kStagedRows)
      const int64_t row = StagedRow<kGateUp>(tid, r0, a.out_rows);
      Tiles::StageScales(stage_s(slot) + tid * Tiles::kScaleBytes, ex, row, kdim, k0);
    }
    float* sx = stage_x(slot);
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      const int n = tid / (kChunk / 4) + 8 * j;
      if (j >= nt) break;
      const bool ok = k0 + 4 * xpiece < kdim;
      CpAsync16(SmemAddr(sx + n * kXStride + 4 * xpiece), ok ? xsrc[j] + k0 : xsrc[j], ok);
    }
  };

  // The warp's groups hold rows (group 0: staged rows 32w .. 32w + 15, group 1: 32w + 16 ..); a
  // warp whose rows are all past the matrix only copies. Lane rows: staged 32w + 16m + g + 8h is
  // index 2m + h of the format's per-row state (scales).
  const bool active = StagedRow<kGateUp>(32 * warp, r0, a.out_rows) >= 0;
  int64_t lane_rows[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = StagedRow<kGateUp>(32 * warp + 16 * (i / 2) + g + 8 * (i % 2), r0, a.out_rows);
    lane_rows[i] = r < 0 ? 0 : r;  // a row past the matrix reads row 0's scales; its results are dropped
  }
  const typename Tiles::RowState rs = Tiles::RowStateOf(ex, lane_rows);
  float acc[2][kNTiles][4] = {};
  float part[2][kNTiles][4] = {};  // block-scaled formats: the current scale block's sums
#pragma unroll
  for (int q = 0; q < kStages - 1; ++q) {
    if (q < chunks) issue(q, q);
    CpAsyncCommit();
  }
  for (int64_t q = 0; q < chunks; ++q) {
    CpAsyncWait<kStages - 2>();  // chunk q has landed (this thread's copies) ...
    __syncthreads();             // ... everyone's, and every warp is done with chunk q - 1's stage
    if (q + kStages - 1 < chunks) issue(q + kStages - 1, static_cast<int>((q + kStages - 1) % kStages));
    CpAsyncCommit();
    if (!active) continue;
    const int slot = static_cast<int>(q % kStages);
    const unsigned char* sw = stage_w(slot) + (32 * warp + g) * Tiles::kRowBytes;
    const unsigned char* ss = stage_s(slot) + (32 * warp + g) * Tiles::kScaleBytes;
    const float* sx = stage_x(slot) + g * kXStride + 8 * c;
    const float* xr[kNTiles];
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) xr[j] = sx + 8 * j * kXStride;
#pragma unroll
    for (int s = 0; s < kChunk / 32; ++s) {
      const int64_t k = q * kChunk + 32 * s;
      if (k >= kdim) break;  // kdim % 32 == 0: a k step is all in or all out
      uint4 w[4];  // rows g, g + 8, g + 16, g + 24 (staged rows swizzle alike: same low 3 bits)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        w[r] = Tiles::Widen(sw + 8 * r * Tiles::kRowBytes, ss + 8 * r * Tiles::kScaleBytes, s, c, Tiles::Swizzle(g));
      }
      if constexpr (Tiles::kBlockScaled) {
        mma_rows::MmaStep<2, typename Tiles::Src>(part, w, xr, 32 * s, 0, nt);
        if constexpr (Tiles::kBlocksEndInsideChunks) {  // the scale block ends with this k step
          if (k + 32 >= kdim || Tiles::BlockOf(a.w, k + 32) != Tiles::BlockOf(a.w, k)) {
            Tiles::AddScaled(acc, part, rs, Tiles::BlockOf(a.w, k), nt);
          }
        }
      } else {
        mma_rows::MmaStep<2, typename Tiles::Src>(acc, w, xr, 32 * s, 0, nt);
      }
    }
    if constexpr (Tiles::kBlockScaled) {
      if constexpr (!Tiles::kBlocksEndInsideChunks) {  // the scale block ends with this chunk
        if (q + 1 == chunks || Tiles::BlockOf(a.w, (q + 1) * kChunk) != Tiles::BlockOf(a.w, q * kChunk)) {
          Tiles::AddScaled(acc, part, rs, Tiles::BlockOf(a.w, q * kChunk), nt);
        }
      }
    }
  }
  if (!active) return;
  Tiles::ScaleRows(acc, rs);
  // acc[m][j]: e in {0, 1} is (group row g, token 8j + 2c + e), e + 2 is (group row g + 8, the same token).
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = 8 * j + 2 * c + e;
      if (n >= tile.z) continue;
      const int64_t p = a.sorted[tile.y + n];
      if constexpr (kGateUp) {
        float* dst = a.out + p * a.out_rows + r0 + 16 * warp + g;
        dst[0] = SiluF(acc[0][j][e]) * acc[1][j][e];
        dst[8] = SiluF(acc[0][j][e + 2]) * acc[1][j][e + 2];
      } else {
        const float pw = a.weights[p];
        float* dst = a.out + p * a.out_rows + r0 + 32 * warp + g;
        dst[0] = pw * acc[0][j][e];
        dst[8] = pw * acc[0][j][e + 2];
        dst[16] = pw * acc[1][j][e];
        dst[24] = pw * acc[1][j][e + 2];
      }
    }
  }
}

inline size_t Align256(size_t b) { return (b + 255) / 256 * 256; }

// Device bytes of the scratch for T tokens of K experts each (any format).
inline size_t ScratchBytes(int64_t T, int64_t K, int64_t H) {
  return Align256(MoeSortBytes(T * K, kTileTokens)) + static_cast<size_t>(T * K * H) * sizeof(float);
}

// The three steps: sort the pairs, gate_up into act, down into the pairs' rows, then their sums.
template <typename Tiles>
void Run(float* out, float* act, const float* x, const int32_t* ids, const float* weights,
         const typename Tiles::Stack& gate_up, const typename Tiles::Stack& down, int64_t T, int64_t K, int64_t H,
         int64_t I, int64_t E, void* scratch, cudaStream_t stream) {
  // Above 48 KB a block's dynamic shared memory must be allowed per kernel and per device (TP ranks
  // may be threads on several GPUs of one process): set on every launch, a driver call, not a sync.
  for (auto* kernel : {MoeBatchedKernel<true, Tiles>, MoeBatchedKernel<false, Tiles>}) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<Tiles>));
  }
  auto* base = static_cast<unsigned char*>(scratch);
  auto* part = reinterpret_cast<float*>(base + Align256(MoeSortBytes(T * K, kTileTokens)));
  const MoeSorted s = MoeSortPairs(base, ids, T * K, kTileTokens, E, stream);
  const auto tiles = static_cast<unsigned>(s.tile_bound);
  const Args<Tiles> gu{act, x, s.tiles, s.sorted, nullptr, gate_up, K, I, H};
  Launch(MoeBatchedKernel<true, Tiles>, dim3(tiles, static_cast<unsigned>((I + 63) / 64)), dim3(kThreads),
         kSmemBytes<Tiles>, stream, gu);
  KERNEL_CHECK();
  const Args<Tiles> dn{part, act, s.tiles, s.sorted, weights, down, K, H, I};
  Launch(MoeBatchedKernel<false, Tiles>, dim3(tiles, static_cast<unsigned>((H + 127) / 128)), dim3(kThreads),
         kSmemBytes<Tiles>, stream, dn);
  KERNEL_CHECK();
  MoeReducePairs(out, part, T, K, H, stream);
}

}  // namespace tandem::kernels::moe_batched_detail
