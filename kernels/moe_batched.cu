#include "kernels/moe_batched.h"

#include "kernels/cp_async.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma_rows.cuh"
#include "kernels/moe_pairs.cuh"

namespace tandem::kernels {

namespace {

using mma_rows::kNTiles;
using mma_rows::MmaStep;
using mma_rows::SharedFloatRows;

constexpr int kTileTokens = 8 * kNTiles;      // pairs per tile (the sort's tile rows)
constexpr int kWarps = 4;                     // a warp owns two 16-row groups of the staged rows
constexpr int kStagedRows = kWarps * 2 * 16;  // weight rows a block stages: 128
constexpr int kChunk = 64;                    // k elements per stage: 128 bytes of a bf16 row
constexpr int kStages = 4;                    // stages in the ring: three chunks in flight while one is used
constexpr int kPieces = kChunk / 8;           // 16-byte pieces of a staged weight row
constexpr int kXStride = kChunk + 4;          // floats per staged token row: 272 bytes (see Swizzle)
constexpr int kWStageElems = kStagedRows * kChunk;
constexpr int kXStageFloats = kTileTokens * kXStride;
constexpr int kStageBytes = kWStageElems * 2 + kXStageFloats * 4;
constexpr int kSmemBytes = kStages * kStageBytes;  // 100,352: two blocks an SM on the H200, one on the GB10

// Piece p of staged weight row r lies at piece p ^ Swizzle(r). A warp's 16-byte loads run in phases
// of 8 lanes, rows g = 2q and 2q + 1 with pieces 4s + c (c < 4) of k step s: Swizzle sends the two
// rows' pieces to opposite halves of the 128-byte row, so the 8 loads hit 8 different bank groups;
// the copies (8 threads a row, all 8 pieces) are conflict-free under any permutation. The token
// rows need no swizzle: 272 bytes apart, rows g and g + 1 start 16 bytes apart in the banks.
__device__ __forceinline__ int Swizzle(int r) { return ((r & 1) << 2) | ((r >> 1) & 3); }

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

// Grid (tile bound, ceil(out_rows / (kGateUp ? 64 : 128))), kWarps * 32 threads, kSmemBytes.
// The block streams its expert's 128 staged rows through a ring of kStages shared-memory stages with
// cp.async, kChunk of k at a time, together with the same k of its tile's token rows; each warp
// multiplies its two 16-row groups by the tile's tokens on tensor cores (mma_rows.cuh). Each
// output is one warp's sum over k in order: deterministic.
//   gate_up: x = token rows (H floats, token = pair / K), w (E, 2I, H), out = act: act[p] (I) =
//            silu(x W_gate^T) * (x W_up^T).
//   down:    x = act rows (I floats), w (E, H, I), out = part: part[p] (H) = weights[p] * (act[p] W^T).
template <bool kGateUp>
__global__ void __launch_bounds__(kWarps * 32) MoeBatchedKernel(float* out, const float* x, const int4* tiles,
                                                                const int32_t* sorted, const float* weights,
                                                                const uint16_t* w, int64_t K, int64_t out_rows,
                                                                int64_t kdim) {
  extern __shared__ __align__(16) unsigned char smem[];
  GridDepWait();  // the sort (gate_up) or act (down)
  GridDepLaunchDependents();
  const int4 tile = tiles[blockIdx.x];
  if (tile.x < 0) return;  // past the last tile (the whole block)
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, c = lane % 4;
  constexpr int kOutPerBlock = kGateUp ? kStagedRows / 2 : kStagedRows;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kOutPerBlock;
  const uint16_t* we = w + static_cast<int64_t>(tile.x) * (kGateUp ? 2 : 1) * out_rows * kdim;
  const int nt = (tile.z + 7) / 8;  // n-tiles of 8 tokens; columns past tile.z repeat the first pair
  const int64_t chunks = (kdim + kChunk - 1) / kChunk;

  // This thread's copies: weight piece tid % 8 of staged rows tid / 8 + 16j, and 16-byte piece
  // tid % 16 of token rows tid / 16 + 8j.
  const int wpiece = tid % kPieces, xpiece = tid % (kChunk / 4);
  const float* xsrc[kNTiles];
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const int n = tid / (kChunk / 4) + 8 * j;
    const int64_t p = sorted[tile.y + (n < tile.z ? n : 0)];
    xsrc[j] = x + (kGateUp ? p / K : p) * kdim + 4 * xpiece;
  }
  auto stage_w = [&](int slot) { return reinterpret_cast<uint16_t*>(smem + slot * kStageBytes); };
  auto stage_x = [&](int slot) {
    return reinterpret_cast<float*>(smem + slot * kStageBytes + kWStageElems * 2);
  };
  auto issue = [&](int64_t q, int slot) {
    const int64_t k0 = q * kChunk;
    uint16_t* sw = stage_w(slot);
#pragma unroll
    for (int j = 0; j < kStagedRows * kPieces / (kWarps * 32); ++j) {
      const int rr = tid / kPieces + 16 * j;
      const int64_t row = StagedRow<kGateUp>(rr, r0, out_rows);
      const bool ok = row >= 0 && k0 + 8 * wpiece < kdim;
      CpAsync16(SmemAddr(sw + rr * kChunk + (wpiece ^ Swizzle(rr)) * 8), ok ? we + row * kdim + k0 + 8 * wpiece : we,
                ok);
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
  // warp whose rows are all past the matrix only copies.
  const bool active = StagedRow<kGateUp>(32 * warp, r0, out_rows) >= 0;
  float acc[2][kNTiles][4] = {};
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
    const uint16_t* sw = stage_w(slot) + (32 * warp + g) * kChunk;
    const float* sx = stage_x(slot) + g * kXStride + 8 * c;
    const float* xr[kNTiles];
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) xr[j] = sx + 8 * j * kXStride;
#pragma unroll
    for (int s = 0; s < kChunk / 32; ++s) {
      if (q * kChunk + 32 * s >= kdim) break;  // kdim % 32 == 0: a k step is all in or all out
      const int piece = ((4 * s + c) ^ Swizzle(g)) * 8;  // rows g, g + 8, g + 16, g + 24 swizzle alike
      uint4 a[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = *reinterpret_cast<const uint4*>(sw + 8 * r * kChunk + piece);
      MmaStep<2, SharedFloatRows>(acc, a, xr, 32 * s, 0, nt);
    }
  }
  if (!active) return;
  // acc[m][j]: e in {0, 1} is (group row g, token 8j + 2c + e), e + 2 is (group row g + 8, the same token).
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = 8 * j + 2 * c + e;
      if (n >= tile.z) continue;
      const int64_t p = sorted[tile.y + n];
      if constexpr (kGateUp) {
        float* dst = out + p * out_rows + r0 + 16 * warp + g;
        dst[0] = SiluF(acc[0][j][e]) * acc[1][j][e];
        dst[8] = SiluF(acc[0][j][e + 2]) * acc[1][j][e + 2];
      } else {
        const float pw = weights[p];
        float* dst = out + p * out_rows + r0 + 32 * warp + g;
        dst[0] = pw * acc[0][j][e];
        dst[8] = pw * acc[0][j][e + 2];
        dst[16] = pw * acc[1][j][e];
        dst[24] = pw * acc[1][j][e + 2];
      }
    }
  }
}

size_t Align256(size_t b) { return (b + 255) / 256 * 256; }

}  // namespace

bool MoeBatchedSupported(int64_t H, int64_t I) {
  return H > 0 && I > 0 && H % 32 == 0 && I % 32 == 0 && MaxSmemPerBlock() >= kSmemBytes;
}

size_t MoeBatchedScratchBytes(int64_t T, int64_t K, int64_t H, int64_t /*I*/) {
  return Align256(MoeSortBytes(T * K, kTileTokens)) + static_cast<size_t>(T * K * H) * sizeof(float);
}

void moe_batched(float* out, float* act, const float* x, const int32_t* ids, const float* weights,
                 const bf16_bits* gate_up, const bf16_bits* down, int64_t T, int64_t K, int64_t H, int64_t I,
                 int64_t E, void* scratch, cudaStream_t stream) {
  KERNEL_REQUIRE(MoeBatchedSupported(H, I));
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(scratch) % 16 == 0);
  if (T * K == 0) return;
  // Above 48 KB a block's dynamic shared memory must be allowed per kernel and per device (TP ranks
  // may be threads on several GPUs of one process): set on every launch, a driver call, not a sync.
  for (auto* kernel : {MoeBatchedKernel<true>, MoeBatchedKernel<false>}) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  }
  auto* base = static_cast<unsigned char*>(scratch);
  auto* part = reinterpret_cast<float*>(base + Align256(MoeSortBytes(T * K, kTileTokens)));
  const MoeSorted s = MoeSortPairs(base, ids, T * K, kTileTokens, E, stream);
  const auto tiles = static_cast<unsigned>(s.tile_bound);
  Launch(MoeBatchedKernel<true>, dim3(tiles, static_cast<unsigned>((I + 63) / 64)), dim3(kWarps * 32), kSmemBytes,
         stream, act, x, s.tiles, s.sorted, nullptr, reinterpret_cast<const uint16_t*>(gate_up), K, I, H);
  KERNEL_CHECK();
  Launch(MoeBatchedKernel<false>, dim3(tiles, static_cast<unsigned>((H + 127) / 128)), dim3(kWarps * 32), kSmemBytes,
         stream, part, act, s.tiles, s.sorted, weights, reinterpret_cast<const uint16_t*>(down), K, H, I);
  KERNEL_CHECK();
  MoeReducePairs(out, part, T, K, H, stream);
}

}  // namespace tandem::kernels
