// The routed experts of a decode step's few tokens, and the dense product of one token, with FP8 or
// NVFP4 weights on the tensor cores, the weights read from device memory straight into mma.sync
// fragments: no shared-memory staging of the weights, and one mma multiplies 16 rows by 16 columns
// of one token.
//
// Why: the CUDA-core kernels of these products (quant_fp8.cu, quant_nvfp4.cu) spend per weight a
// widening to half, a widening to float and a float multiply-add, about 2.5 (FP8) and 4 (NVFP4)
// instructions, and Nsight Compute had them bound by instruction issue with the DRAM half idle
// (docs/bench/decode-h200.md). Here a weight costs its widening to half only (FP8: one cvt per two
// weights); the multiply-adds are mma.sync m16n8k16 (f16 operands, float32 accumulation), 256 a warp
// instruction.
//
// The fragments. Lane l of a warp is in group g = l / 4 and quarter q = l % 4. A warp owns 16 mma
// rows: row g and row g + 8 (gate row i and up row i of an expert in moe_gate_up; output rows h0 + g
// and h0 + 8 + g in moe_down). A chunk is 4 pieces of each row, lane q loading piece q of row g and
// of row g + 8 (16 bytes: 16 FP8 or 32 NVFP4 columns; 8 bytes for FP8's 32-blocks). Since the mma
// sums over k, the k order inside an mma is free as long as A (weights) and B (x) agree: a piece
// widens to half pairs in whatever order its format makes cheapest, and the token's values are staged
// in shared memory in that same order (quant_moe_token_fragments.cuh, host-testable). B has 8
// columns n: column 0 (lanes 0-3) carries the token's x rounded to half (hi), column 1 (lanes 4-7)
// the remainder x - hi rounded to half (lo), the other six are zero. So one mma gives row g's
// product with hi in C[g][0] and with lo in C[g][1], both on lane 4g: their sum is the product with x
// to about 22 bits, as the float32 kernels' inputs. Half's range: the staged values of a warp's slice
// are first multiplied by a power of two that puts their largest magnitude in [2^14, 2^15) (exact),
// undone on the float32 sums.
//
// A format P is its fragments (kChunkCols, kPairs, kChunksPerRound, PairCols) plus:
//   kChunkScale               FP8: each chunk's products get their rows' block scale (float32) as
//                             the chunk ends; NVFP4: the group scales are applied to the weights
//                             in half precision (exact) and the row scale once at the end
//   Matrix, Row, Piece        the stack, one row's pointers, one lane's piece (and its scales)
//   RowOf(m, e, r), Fetch(piece, m, row, c, q, live), Widen(a, piece), ChunkScale(piece), RowScale(m, row)
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma_sync.cuh"
#include "kernels/moe_batched.h"
#include "kernels/quant_moe_token_fragments.cuh"
#include "kernels/row_norm.cuh"

namespace tandem::kernels::detail::few_tokens {

// Steps of up to this many tokens take the expert kernels: every decode step below the batched
// tensor-core experts (moe_batched.h, from MoeBatchedMinTokens: 20 tokens FP8, 10 NVFP4), whose
// CUDA-core kernels these replace (both read a chosen expert once per token that chose it). The
// dense kernel serves one token (a tile of tokens shares each weight load in the CUDA-core kernels
// from 2).
constexpr int64_t MaxTokens(WeightFormat format) { return MoeBatchedMinTokens(format) - 1; }

// ---- formats (the fragments' arithmetic: quant_moe_token_fragments.cuh) ----------------------

// Block-scaled FP8. A chunk (4 x kPieceBytes columns) lies inside one scale block when block_in is a
// power of two >= the chunk and col_phase is a multiple of it: 16-byte pieces for 128 x 128 blocks
// and their TP shards down to 64-column steps, 8-byte pieces for 32-blocks (the test fixtures) and
// shards starting 32 columns into a block (TP 8 of a 768-wide expert). Each chunk's products get
// their rows' block scale (float32) as the chunk ends.
template <int kPieceBytes>
struct Fp8TokenT : Fp8Fragments<kPieceBytes> {
  using F = Fp8Fragments<kPieceBytes>;
  static constexpr bool kChunkScale = true;
  struct Matrix {
    const uint8_t* data;
    const float* scales;
    int64_t data_stride, scale_stride;  // between the experts of the stack
    int32_t cols, scale_cols, row_block, col_phase, shift;
  };
  struct Row {
    const uint8_t* data;
    const float* scales;
  };
  struct Piece {
    uint32_t w[F::kWords];
    float s;
  };
  __device__ static Row RowOf(const Matrix& m, int64_t e, int64_t r) {
    return {m.data + e * m.data_stride + r * m.cols, m.scales + e * m.scale_stride + (r / m.row_block) * m.scale_cols};
  }
  // Lane q's bytes of chunk c (zero past the row's end); weights and scales only.
  __device__ static void Fetch(Piece& p, const Matrix& m, const Row& row, int c, int q, bool live) {
    const int col = c * F::kChunkCols + q * kPieceBytes;
    if constexpr (kPieceBytes == 16) {
      const uint4 v = live ? __ldcs(reinterpret_cast<const uint4*>(row.data + col)) : make_uint4(0, 0, 0, 0);
      p.w[0] = v.x, p.w[1] = v.y, p.w[2] = v.z, p.w[3] = v.w;
    } else {
      const uint2 v = live ? __ldcs(reinterpret_cast<const uint2*>(row.data + col)) : make_uint2(0, 0);
      p.w[0] = v.x, p.w[1] = v.y;
    }
    p.s = __ldg(row.scales + ((c * F::kChunkCols + m.col_phase) >> m.shift));
  }
  __device__ static void Widen(uint32_t (&a)[F::kPairs], const Piece& p) { F::WidenWords(a, p.w); }
  __device__ static float ChunkScale(const Piece& p) { return p.s; }
  __device__ static float RowScale(const Matrix&, const Row&) { return 1.0f; }
};
using Fp8Token = Fp8TokenT<16>;
using Fp8Token32 = Fp8TokenT<8>;

// NVFP4 (cols % 32 == 0): the group scales are applied to the weights in half precision (exact), the
// row's second scale (times 2^14) once at the end.
struct Nvfp4Token : Nvfp4Fragments {
  using F = Nvfp4Fragments;
  static constexpr bool kChunkScale = false;
  struct Matrix {
    const uint8_t* data;
    const uint8_t* group_scales;
    const float* row_scale2;
    int64_t data_stride, group_stride, row_stride;  // between the experts of the stack
    int32_t cols;
  };
  struct Row {
    const uint8_t* data;
    const uint8_t* gs;
    const float* s2;
  };
  struct Piece {
    uint32_t w[F::kWords];
    uint32_t gs;  // the two group scale bytes, the first low
  };
  __device__ static Row RowOf(const Matrix& m, int64_t e, int64_t r) {
    return {m.data + e * m.data_stride + r * (m.cols / 2), m.group_scales + e * m.group_stride + r * (m.cols / 16),
            m.row_scale2 + e * m.row_stride + r};
  }
  __device__ static void Fetch(Piece& p, const Matrix&, const Row& row, int c, int q, bool live) {
    const int byte = c * (F::kChunkCols / 2) + q * 16;
    const uint4 v = live ? __ldcs(reinterpret_cast<const uint4*>(row.data + byte)) : make_uint4(0, 0, 0, 0);
    p.w[0] = v.x, p.w[1] = v.y, p.w[2] = v.z, p.w[3] = v.w;
    p.gs = live ? __ldcs(reinterpret_cast<const unsigned short*>(row.gs + byte / 8)) : 0u;
  }
  __device__ static void Widen(uint32_t (&a)[F::kPairs], const Piece& p) { F::WidenWords(a, p.w, p.gs); }
  __device__ static float ChunkScale(const Piece&) { return 1.0f; }
  __device__ static float RowScale(const Matrix&, const Row& row) { return __ldg(row.s2) * 16384.0f; }
};

// ---- one warp's slice ----------------------------------------------------------------------

// The loads of a round: chunks first .. first + kChunksPerRound - 1 (those below nchunks) of rows a
// (g) and b (g + 8).
template <class P>
struct Round {
  typename P::Piece p[P::kChunksPerRound][2];
};

template <class P>
__device__ __forceinline__ void FetchRound(Round<P>& rd, const typename P::Matrix& m, const typename P::Row& ra,
                                           const typename P::Row& rb, int first, int nchunks, int cols) {
  const int q = threadIdx.x % 4;
#pragma unroll
  for (int n = 0; n < P::kChunksPerRound; ++n) {
    const int c = first + n;
    if (c < nchunks) {
      const bool live = c * P::kChunkCols + q * (P::kChunkCols / 4) < cols;
      P::Fetch(rd.p[n][0], m, ra, c, q, live);
      P::Fetch(rd.p[n][1], m, rb, c, q, live);
    }
  }
}

// Stages the token's x (float32, `cols` long) for the round's chunks as half pairs in the fragments'
// order: pair s holds the columns StagedCols(s) times 2^e, rounded (hi[s]), and its remainder
// rounded (lo[s]). Returns 2^-e. The
// whole warp calls it; it reads only the warp's own hi / lo. kSharedX: x lies in shared memory.
template <class P, bool kSharedX = false>
__device__ __forceinline__ float StageX(uint32_t* hi, uint32_t* lo, const float* x, int first, int cols) {
  constexpr int kPerLane = kRoundPairs<P> / 32;
  const int lane = threadIdx.x % 32;
  float2 v[kPerLane];
  float mx = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    int a, b;
    StagedCols<P>(k * 32 + lane, first, a, b);
    v[k].x = a < cols ? LoadX<kSharedX>(x + a) : 0.0f;
    v[k].y = b < cols ? LoadX<kSharedX>(x + b) : 0.0f;
    mx = fmaxf(mx, fmaxf(fabsf(v[k].x), fabsf(v[k].y)));
  }
  mx = WarpMax(mx);
  int e = 0;
  if (mx > 0.0f && mx <= 3.0e38f) e = min(100, max(-100, 14 - ilogbf(mx)));
  const float up = __int_as_float((127 + e) << 23), down = __int_as_float((127 - e) << 23);
  __syncwarp();  // the previous round's readers are done with hi / lo
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int s = k * 32 + lane;
    const float x0 = v[k].x * up, x1 = v[k].y * up;
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 hf = __half22float2(h);
    hi[s] = HalfPairBits(h);
    lo[s] = HalfPairBits(__floats2half2_rn(x0 - hf.x, x1 - hf.y));
  }
  __syncwarp();
  return down;
}

// acc_a / acc_b (on lane 4g: rows g and g + 8) += the round's products, times `down` (2^-e of StageX)
// and, FP8, each chunk's block scales.
template <class P>
__device__ __forceinline__ void UseRound(float& acc_a, float& acc_b, const Round<P>& rd, const uint32_t* hi,
                                         const uint32_t* lo, int first, int nchunks, float down) {
  const int lane = threadIdx.x % 32, q = lane % 4;
  const uint32_t* xs = lane < 4 ? hi : lo;
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float ra = 0.0f, rb = 0.0f;
#pragma unroll
  for (int n = 0; n < P::kChunksPerRound; ++n) {
    if (first + n >= nchunks) break;
    uint32_t xb[P::kPairs];
    if (lane < 8) {
      const uint4* src = reinterpret_cast<const uint4*>(xs + StagedIndex<P>(n, q, 0));
#pragma unroll
      for (int v = 0; v < P::kPairs / 4; ++v) {
        const uint4 u = src[v];
        xb[4 * v] = u.x, xb[4 * v + 1] = u.y, xb[4 * v + 2] = u.z, xb[4 * v + 3] = u.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < P::kPairs; ++i) xb[i] = 0u;
    }
    uint32_t wa[P::kPairs], wb[P::kPairs];
    P::Widen(wa, rd.p[n][0]);
    P::Widen(wb, rd.p[n][1]);
#pragma unroll
    for (int j = 0; j < P::kPairs / 2; ++j) {
      uint32_t a[4], b[2];
      MmaOperands<P>(j, wa, wb, xb, a, b);
      MmaF16(d, a[0], a[1], a[2], a[3], b[0], b[1]);
    }
    if constexpr (P::kChunkScale) {
      ra = fmaf(d[0] + d[1], P::ChunkScale(rd.p[n][0]), ra);
      rb = fmaf(d[2] + d[3], P::ChunkScale(rd.p[n][1]), rb);
      d[0] = d[1] = d[2] = d[3] = 0.0f;
    }
  }
  if constexpr (!P::kChunkScale) {
    ra = d[0] + d[1];
    rb = d[2] + d[3];
  }
  acc_a = fmaf(ra, down, acc_a);
  acc_b = fmaf(rb, down, acc_b);
}

// A warp's rounds over chunks first0, first0 + stride, ... (below nchunks) of rows a and b against
// the token x: acc_a / acc_b (on lane 4g) += their products. With `preloaded` the first round's
// loads are already in rd (issued before the kernel's wait). kSharedX: x lies in shared memory.
template <class P, bool kSharedX = false>
__device__ __forceinline__ void SliceDot(float& acc_a, float& acc_b, Round<P>& rd, bool preloaded, uint32_t* hi,
                                         uint32_t* lo, const typename P::Matrix& m, const typename P::Row& ra,
                                         const typename P::Row& rb, const float* x, int first0, int stride, int nchunks,
                                         int cols) {
  for (int first = first0; first < nchunks; first += stride) {
    if (!(preloaded && first == first0)) FetchRound<P>(rd, m, ra, rb, first, nchunks, cols);
    const float down = StageX<P, kSharedX>(hi, lo, x, first, cols);
    UseRound<P>(acc_a, acc_b, rd, hi, lo, first, nchunks, down);
  }
}

// Lane 4g's two rows, times their row scales, into row_sums[g] and row_sums[8 + g] (the warp's slot
// of the block's shared sums).
template <class P>
__device__ __forceinline__ void StoreRows(float* row_sums, float acc_a, float acc_b, const typename P::Matrix& m,
                                          const typename P::Row& ra, const typename P::Row& rb) {
  const int lane = threadIdx.x % 32;
  if (lane % 4 == 0) {
    row_sums[lane / 4] = acc_a * P::RowScale(m, ra);
    row_sums[8 + lane / 4] = acc_b * P::RowScale(m, rb);
  }
}

// ---- kernels --------------------------------------------------------------------------------

// Warps of a gate_up or dense block, splitting its rows' columns.
constexpr int kColumnWarps = 8;

// moe_gate_up. Grid (ceil(I / 8), pairs of this launch): block (b, y) computes rows i = 8b .. 8b + 7
// of gate and up of expert ids[p], p = p0 + y, over token p / K; warp w takes chunks w * R, w * R +
// kColumnWarps * R, ... (R = kChunksPerRound) and the warps' sums meet in shared memory in a fixed
// order. The expert comes from the router: nothing is loaded before the wait, and the next kernel
// may launch only after it (moe_down then reads the ids early).
template <class P>
__global__ void __launch_bounds__(kColumnWarps * 32)
    TokenGateUpKernel(float* act, const float* x, const int32_t* ids, typename P::Matrix m, int64_t I, int64_t K,
                      int64_t p0) {
  __shared__ __align__(16) uint32_t staged[kColumnWarps][2][kRoundPairs<P>];
  __shared__ float partial[kColumnWarps][16];
  GridDepWait();
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * 8, p = p0 + blockIdx.y;
  const int64_t e = ids[p], i = i0 + g < I ? i0 + g : I - 1;
  const typename P::Row ra = P::RowOf(m, e, i), rb = P::RowOf(m, e, I + i);
  const int cols = m.cols, nchunks = (cols + P::kChunkCols - 1) / P::kChunkCols;
  const float* xt = x + (p / K) * cols;
  float acc_a = 0.0f, acc_b = 0.0f;
  Round<P> rd;
  SliceDot<P>(acc_a, acc_b, rd, /*preloaded=*/false, staged[warp][0], staged[warp][1], m, ra, rb, xt,
              warp * P::kChunksPerRound, kColumnWarps * P::kChunksPerRound, nchunks, cols);
  StoreRows<P>(partial[warp], acc_a, acc_b, m, ra, rb);
  __syncthreads();
  if (threadIdx.x < 8 && i0 + threadIdx.x < I) {
    float gate = 0.0f, up = 0.0f;
#pragma unroll
    for (int w = 0; w < kColumnWarps; ++w) gate += partial[w][threadIdx.x], up += partial[w][8 + threadIdx.x];
    act[p * I + i0 + threadIdx.x] = SiluF(gate) * up;
  }
}

// The dense product of one token (matmul_quant's batch-1 form). Grid (ceil(rows / 16)): block b
// computes rows 16b .. 16b + 15 (rows g and 8 + g of each warp), the warps splitting the columns as
// in TokenGateUpKernel. Weights never change during a step: the first round is loaded before the
// wait on the previous kernel. With kNorm, x is unused: every block first normalises `norm`'s row
// into its dynamic shared memory (kernels/row_norm.cuh, as SplitMatvecKernel), block 0 storing the
// residual, and multiplies that.
template <class P, bool kNorm = false>
__global__ void __launch_bounds__(kColumnWarps * 32)
    TokenMatvecKernel(float* y, const float* x, typename P::Matrix m, int64_t rows, RowNorm norm) {
  __shared__ __align__(16) uint32_t staged[kColumnWarps][2][kRoundPairs<P>];
  __shared__ float partial[kColumnWarps][16];
  extern __shared__ float4 token_norm_row[];
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * 16;
  const typename P::Row ra = P::RowOf(m, 0, r0 + g < rows ? r0 + g : rows - 1);
  const typename P::Row rb = P::RowOf(m, 0, r0 + 8 + g < rows ? r0 + 8 + g : rows - 1);
  const int cols = m.cols, nchunks = (cols + P::kChunkCols - 1) / P::kChunkCols;
  const int first0 = warp * P::kChunksPerRound;
  Round<P> rd;
  if (first0 < nchunks) FetchRound<P>(rd, m, ra, rb, first0, nchunks, cols);
  if constexpr (kNorm) StageNormWeights(NormWeightsAfter(token_norm_row, cols), norm.norm_w, cols);
  GridDepWait();
  if constexpr (kNorm) {
    BlockNormRow<kColumnWarps * 32>(token_norm_row, NormWeightsAfter(token_norm_row, cols), norm, cols,
                                    blockIdx.x == 0);
    x = reinterpret_cast<const float*>(token_norm_row);
  }
  float acc_a = 0.0f, acc_b = 0.0f;
  SliceDot<P, kNorm>(acc_a, acc_b, rd, /*preloaded=*/true, staged[warp][0], staged[warp][1], m, ra, rb, x, first0,
                     kColumnWarps * P::kChunksPerRound, nchunks, cols);
  StoreRows<P>(partial[warp], acc_a, acc_b, m, ra, rb);
  __syncthreads();
  if (threadIdx.x < 16 && r0 + threadIdx.x < rows) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kColumnWarps; ++w) s += partial[w][threadIdx.x];
    y[r0 + threadIdx.x] = s;
  }
}

// moe_down, weighted and summed over each token's K slots. Grid (ceil(H / 16), T), 8 * KS warps:
// warp w serves slots k = w % 8, w % 8 + 8, ... and the chunks w / 8 * R, w / 8 * R + KS * R, ... of
// their rows h0 + g and h0 + 8 + g; the warps' weighted sums meet in shared memory in a fixed order.
// With `early` (this launch directly follows moe_gate_up's decode kernel, so the router's ids are
// complete when it starts) a warp loads its first slot's first round before waiting for the
// activations.
template <class P, int KS>
__global__ void __launch_bounds__(8 * KS * 32)
    TokenDownKernel(float* out, const float* act, const int32_t* ids, const float* weights, typename P::Matrix m,
                    int64_t H, int64_t K, bool early) {
  constexpr int kWarps = 8 * KS;
  __shared__ __align__(16) uint32_t staged[kWarps][2][kRoundPairs<P>];
  __shared__ float partial[kWarps][16];
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4;
  const int slot0 = warp % 8, first0 = warp / 8 * P::kChunksPerRound;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * 16, t = blockIdx.y;
  const int64_t ha = h0 + g < H ? h0 + g : H - 1, hb = h0 + 8 + g < H ? h0 + 8 + g : H - 1;
  const int cols = m.cols, nchunks = (cols + P::kChunkCols - 1) / P::kChunkCols;
  typename P::Row ra{}, rb{};
  Round<P> rd;
  const auto rows_of = [&](int64_t k) {
    const int64_t e = __ldcg(ids + t * K + k);
    ra = P::RowOf(m, e, ha);
    rb = P::RowOf(m, e, hb);
  };
  const bool preloaded = early && slot0 < K && first0 < nchunks;
  if (preloaded) {
    rows_of(slot0);
    FetchRound<P>(rd, m, ra, rb, first0, nchunks, cols);
  }
  GridDepWait();
  float sum_a = 0.0f, sum_b = 0.0f;
  if (first0 < nchunks) {
    for (int64_t k = slot0; k < K; k += 8) {
      const bool first_slot = k == slot0;
      if (!(first_slot && preloaded)) rows_of(k);
      const float* xk = act + (t * K + k) * cols;
      float da = 0.0f, db = 0.0f;
      SliceDot<P>(da, db, rd, first_slot && preloaded, staged[warp][0], staged[warp][1], m, ra, rb, xk, first0,
                  KS * P::kChunksPerRound, nchunks, cols);
      const float wk = weights[t * K + k];
      sum_a = fmaf(wk, da * P::RowScale(m, ra), sum_a);
      sum_b = fmaf(wk, db * P::RowScale(m, rb), sum_b);
    }
  }
  if (lane % 4 == 0) {
    partial[warp][g] = sum_a;
    partial[warp][8 + g] = sum_b;
  }
  __syncthreads();
  if (threadIdx.x < 16 && h0 + threadIdx.x < H) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += partial[w][threadIdx.x];
    out[t * H + h0 + threadIdx.x] = s;
  }
}

// ---- launchers ------------------------------------------------------------------------------

// One token's y (rows) = W x for a single (rows x cols) matrix (stride fields unused); with `norm`
// (not null) W times the fused norm's row instead of x (FusedNormFits(m.cols)).
template <class P>
void LaunchTokenMatvec(float* y, const float* x, const typename P::Matrix& m, int64_t rows, cudaStream_t stream,
                       const RowNorm* norm = nullptr) {
  const dim3 grid(static_cast<unsigned>((rows + 15) / 16)), block(kColumnWarps * 32);
  if (norm != nullptr) {
    Launch(TokenMatvecKernel<P, true>, grid, block, FusedNormSmemBytes(m.cols), stream, y, nullptr, m, rows, *norm);
  } else {
    Launch(TokenMatvecKernel<P>, grid, block, 0, stream, y, x, m, rows, RowNorm{});
  }
}

// Pairs p0 .. p0 + pairs - 1 (pairs <= 65535) of a stack of (2I x cols) matrices.
template <class P>
void LaunchTokenGateUp(float* act, const float* x, const int32_t* ids, const typename P::Matrix& m, int64_t I,
                       int64_t K, int64_t p0, int64_t pairs, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((I + 7) / 8), static_cast<unsigned>(pairs));
  Launch(TokenGateUpKernel<P>, grid, dim3(kColumnWarps * 32), 0, stream, act, x, ids, m, I, K, p0);
}

// T tokens (T <= 65535) of a stack of (H x cols) matrices: KS warps a slot, enough for one round
// each where the row allows it, at most 3 (768 threads; 1024 spilled on sm_90, ptxas -v), longer
// rows taking more rounds.
template <class P>
void LaunchTokenDown(float* out, const float* act, const int32_t* ids, const float* weights,
                     const typename P::Matrix& m, int64_t H, int64_t T, int64_t K, bool early, cudaStream_t stream) {
  const int64_t rounds = (m.cols + P::kChunkCols * P::kChunksPerRound - 1) / (P::kChunkCols * P::kChunksPerRound);
  const dim3 grid(static_cast<unsigned>((H + 15) / 16), static_cast<unsigned>(T));
  const auto go = [&](auto kernel, int ks) {
    Launch(kernel, grid, dim3(8 * ks * 32), 0, stream, out, act, ids, weights, m, H, K, early);
  };
  if (rounds <= 1) go(TokenDownKernel<P, 1>, 1);
  else if (rounds == 2) go(TokenDownKernel<P, 2>, 2);
  else go(TokenDownKernel<P, 3>, 3);
}

}  // namespace tandem::kernels::detail::few_tokens
