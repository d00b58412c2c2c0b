// The prefill MoE GEMM's main kernel (moe_gemm.cu; the products of moe_gemm.h without the split):
// a block multiplies one pair tile (the sort's <= 64 pairs of one expert) by 256 rows of the
// expert's weights on bf16 tensor cores (mma.sync m16n8k16 from ldmatrix fragments, float
// accumulate), both operands copied into a ring of shared-memory stages with cp.async.
//
//  - A: the pairs' activation rows, already bf16 (moe_gemm.cu rounds x / act once into scratch);
//    B: the expert's weight rows. A k step is 32 wide: A 64 x 32 and B 256 x 32 bf16 a stage, rows
//    80 bytes apart so that the 8 row addresses of one ldmatrix fall in 8 distinct bank groups.
//  - 4 warps, each all 64 pairs x 64 weight rows: per 16-wide k piece 4 A and 4 B ldmatrix.x4 feed
//    32 mma, and the accumulators (128 floats a thread) stay in registers to the end.
//  - gate_up: the block's rows are 128 gate rows i and the 128 matching up rows I + i; a warp holds
//    32 of each, so silu(gate) * up is formed in registers and stored without a pass through
//    shared memory, as float32 (act) or rounded to bf16 (what down reads: moe_grouped). down: 256
//    rows h, stored as weights[p] * product (the partial rows).
//  - Rows past I (gate_up) or H (down) and pairs past the tile copy zeros and store nothing.
//
// Plain sm_80 instructions (the H200 and the DGX Spark's GB10 alike). The stage count is the
// kernel's template argument: the launcher takes 4 where the device's shared memory holds them
// (100 KB a block: the H200), else 3 (75 KB: the GB10's 99 KB).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cp_async.cuh"
#include "kernels/device_utils.cuh"
#include "kernels/mma_sync.cuh"

namespace tandem::kernels::moe_mma {

enum class Op { kGateUp, kDown };

constexpr int kBM = 64;        // pairs per tile: the sort's tile (moe_pairs.cuh)
constexpr int kBN = 256;       // weight rows per block
constexpr int kBK = 32;        // k per stage
constexpr int kLds = kBK + 8;  // bf16 row stride in shared memory (80 bytes)
constexpr int kThreads = 128;  // 4 warps of 64 pairs x 64 rows
constexpr int kWarpN = kBN / (kThreads / 32);
constexpr int kStageBytes = (kBM + kBN) * kLds * 2;  // 25,600
__host__ __device__ constexpr int SmemBytes(int stages) { return stages * kStageBytes; }

// Output rows a block covers: gate_up 128 (each a gate and an up row), down 256.
__host__ __device__ constexpr int BlockOutputs(Op op) { return op == Op::kGateUp ? kBN / 2 : kBN; }

// Grid tile_bound * n_blocks (n_blocks = ceil(outputs / BlockOutputs(op))), the n blocks of a pair
// tile adjacent: the blocks resident together share their tiles' activation rows and a few
// experts' weights in L2 (with the tiles fastest, each tile's rows came from DRAM once per n
// block). kThreads threads, SmemBytes(kStages) of dynamic shared memory. `a`: bf16 rows, gate_up
// x[t] (H wide, pair p reads row p / K), down act[p] (I wide). `sorted` / `tiles`: the sort's
// (moe_pairs.cuh). Writes as moe_gemm.h says, into `dst` of type Out: float, or (gate_up only)
// uint16_t for bf16 bits.
template <Op op, int kStages, typename Out>
__global__ void __launch_bounds__(kThreads, 2)
    MoeGroupedMmaKernel(Out* dst, const uint16_t* a, const int32_t* sorted, const int4* tiles,
                        const float* weights, const uint16_t* w_all, int n_blocks, int64_t K, int64_t H,
                        int64_t I) {
  static_assert(kStages >= 2, "a ring needs two stages");
  static_assert(std::is_same_v<Out, float> || (op == Op::kGateUp && std::is_same_v<Out, uint16_t>),
                "float outputs, or bf16 activations");
  const int4 tile = tiles[blockIdx.x / n_blocks];
  if (tile.x < 0) return;  // past the last tile of this step
  const int64_t e = tile.x;
  const int rows = tile.z;
  constexpr bool kGateUp = op == Op::kGateUp;
  const int64_t kdim = kGateUp ? H : I;
  const int64_t outputs = kGateUp ? I : H;  // gate_up: i < I, down: h < H
  const uint16_t* we = w_all + e * (kGateUp ? 2 * I : H) * kdim;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x % n_blocks) * BlockOutputs(op);

  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int pair_of[kBM];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid < kBM) pair_of[tid] = tid < rows ? sorted[tile.y + tid] : -1;
  __syncthreads();

  // Copies of a stage: A's 64 rows x 4 pieces of 16 bytes (two a thread), B's 256 rows x 4 (eight:
  // rows tid / 4 + 32 j). Shared-memory B row r: gate_up gate row n0 + r (r < 128) or up row
  // I + n0 + r - 128; down row n0 + r.
  const int piece = (tid % 4) * 8;
  const uint16_t* a_src[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int p = pair_of[tid / 4 + 32 * j];
    a_src[j] = p < 0 ? nullptr : a + (kGateUp ? (p / K) * H : static_cast<int64_t>(p) * I) + piece;
  }
  const uint16_t* b_src = we + (n0 + tid / 4) * kdim + piece;
  unsigned b_valid = 0;  // bit j: B copy j has a row
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t out = n0 + tid / 4 + 32 * (kGateUp ? j % 4 : j);
    b_valid |= (out < outputs ? 1u : 0u) << j;
  }
  const uint32_t smem0 = SmemAddr(smem);
  auto a_stage = [&](int st) { return smem0 + st * kStageBytes; };
  auto b_stage = [&](int st) { return smem0 + st * kStageBytes + kBM * kLds * 2; };
  auto issue = [&](int kt, int stage) {
    const int64_t k0 = static_cast<int64_t>(kt) * kBK;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      CpAsync16(a_stage(stage) + ((tid / 4 + 32 * j) * kLds + piece) * 2, a_src[j] ? a_src[j] + k0 : a,
                a_src[j] != nullptr);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      // gate_up: copies 4..7 are the up rows, I rows further on.
      const int64_t row_off = 32 * (kGateUp ? j % 4 : j) * kdim + (kGateUp && j >= 4 ? I * kdim : 0);
      const bool valid = (b_valid >> j) & 1u;
      CpAsync16(b_stage(stage) + ((tid / 4 + 32 * j) * kLds + piece) * 2, valid ? b_src + row_off + k0 : we, valid);
    }
  };

  // The warp's 64 B rows as 4 groups of 16 (two n8 tiles each): gate_up gate rows 32 w .. 32 w + 31
  // then up rows 128 + 32 w ..; down rows 64 w .. 64 w + 63.
  auto b_row0 = [&](int x) { return kGateUp ? (x < 2 ? 32 * warp + 16 * x : 128 + 32 * warp + 16 * (x - 2))
                                            : kWarpN * warp + 16 * x; };
  // ldmatrix lane offsets (bytes): A rows lane % 16 at k + 8 (lane / 16); B rows
  // (lane % 8) + 8 (lane / 16) at k + 8 ((lane / 8) % 2), giving b0 b1 of n8 tile 2x then 2x + 1.
  const uint32_t a_lane = ((lane % 16) * kLds + 8 * (lane / 16)) * 2;
  const uint32_t b_lane = ((lane % 8 + 8 * (lane / 16)) * kLds + 8 * ((lane / 8) % 2)) * 2;

  float acc[4][8][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;
    }
  }

  const int nk = static_cast<int>(kdim / kBK);
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nk) issue(st, st);
    CpAsyncCommit();
  }
  int st = 0;  // kt % kStages
  for (int kt = 0; kt < nk; ++kt) {
    CpAsyncWait<kStages - 2>();  // step kt has landed (this thread's copies) ...
    __syncthreads();             // ... everyone's, and every warp is done with step kt - 1's stage
    // Step kt + kStages - 1 goes to the stage step kt - 1 used.
    if (kt + kStages - 1 < nk) issue(kt + kStages - 1, st == 0 ? kStages - 1 : st - 1);
    CpAsyncCommit();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t af[4][4], bf[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) LdMatrixX4(af[i], a_stage(st) + a_lane + (16 * i * kLds + kk) * 2);
#pragma unroll
      for (int x = 0; x < 4; ++x) LdMatrixX4(bf[x], b_stage(st) + b_lane + (b_row0(x) * kLds + kk) * 2);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) Mma(acc[i][j], af[i], bf[j / 2][2 * (j % 2)], bf[j / 2][2 * (j % 2) + 1]);
      }
    }
    st = st + 1 == kStages ? 0 : st + 1;
  }
  CpAsyncWait<0>();  // nothing in flight when the block exits (only empty groups remain)

  // Lane (g, c) = (lane / 4, lane % 4) holds rows 16 i + g and 16 i + g + 8 of n8 tile j, columns
  // 2c and 2c + 1.
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = 16 * i + g + 8 * half;
      if (r >= rows) continue;
      const int64_t p = pair_of[r];
      if constexpr (kGateUp) {
        // n8 tiles 0-3 are gate columns 32 w + 8 j .., tiles 4-7 the matching up columns.
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t col = n0 + 32 * warp + 8 * j + 2 * c;
          if (col >= I) continue;
          const float* gt = &acc[i][j][2 * half];
          const float* up = &acc[i][j + 4][2 * half];
          const float v0 = SiluF(gt[0]) * up[0], v1 = SiluF(gt[1]) * up[1];
          if constexpr (std::is_same_v<Out, float>) {
            *reinterpret_cast<float2*>(dst + p * I + col) = make_float2(v0, v1);
          } else {  // rounded as floats_to_bf16 rounds the float32 act: the same bits
            const __nv_bfloat162 b = __floats2bfloat162_rn(v0, v1);
            *reinterpret_cast<__nv_bfloat162*>(dst + p * I + col) = b;
          }
        }
      } else {
        const float wp = weights[p];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t col = n0 + kWarpN * warp + 8 * j + 2 * c;
          if (col >= H) continue;
          const float* v = &acc[i][j][2 * half];
          *reinterpret_cast<float2*>(dst + p * H + col) = make_float2(wp * v[0], wp * v[1]);
        }
      }
    }
  }
}

}  // namespace tandem::kernels::moe_mma
