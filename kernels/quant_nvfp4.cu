// NVFP4 weights (kernels/quant_weight.h) at decode sizes: the dense product, the two expert kernels and
// the dequantization to bf16 (prefill's GEMM input). The launchers of kernels/quant_detail.h. The
// dense product of one token and the experts' gate/up and down of up to 8 tokens split each row's
// columns over a block's lanes (quant_split_matvec.cuh, Nvfp4Split); the kernels below do the rest.
//
// Layout of the work: a 16-byte load holds 32 codes of one row = two 16-column groups, so each load
// comes with two adjacent bytes of group_scales (one 2-byte load). Lane l of a chunk owns loads
// j = base + k*32 + l (k < NL) of each of its rows: every load instruction of a warp reads 512
// contiguous weight bytes. When cols % 32 == 16 a row is 8-byte aligned only, so those shapes take
// 8-byte loads of one group each (G = 1); everything else is the same code.
//
// Decoding (quant_nvfp4.cuh, E2m1x8ToFloat): each code as its exact half e2m1 * 2^-14, widened to
// float32. The 2^14, the group scale and the row's second scale fold into one float per group and
// row, applied to the group's partial sum per token, so the weights themselves are never scaled.
// The experts' split products of 2 to 8 tokens sum a group's products as half2 instead
// (Nvfp4SplitT::HalfDot: x scaled by a power of two per group and rounded to half, a relative error
// of about 2^-11 a term); every other product, and every product of one token, sums in float32.
// Likewise an e4m3 byte b as half bits ((b & 0x7f) << 7) | ((b & 0x80) << 8) is e4m3(b) * 2^-8
// exactly (the NaN code 0x7f is not special-cased in the products; the dequantization keeps it NaN).
//
// Rows share x: a warp computes R rows over the same columns, so every x element it reads (from L1)
// serves R rows. At R = 1 a lane would read 4 bytes of x per weight (8 per weight byte), which at
// NVFP4's weight rate comes near what L1 delivers per SM (an estimate; not measured here).
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/matmul_batched.h"
#include "kernels/quant_detail.h"
#include "kernels/quant_nvfp4.cuh"
#include "kernels/quant_split_matvec.cuh"

namespace tandem::kernels::detail {

namespace {

constexpr int kWarps = 8;         // dense product: rows of 8 warps per block
constexpr int kGateUpWarps = 4;   // moe_gate_up: one (gate, up) row pair per warp
constexpr int kDownWarps = 8;     // moe_down: one warp per expert slot k (k, k+8, ... when K > 8)
constexpr int kDownRows = 4;      // moe_down: output rows per block (a warp's rows share act)
constexpr int kGateUpLoads = 2;   // a whole 2048-wide row per lane per round (2 x 16 bytes)
constexpr int kDownLoads = 1;     // a 768-wide row is 24 loads: one round
constexpr int64_t kMaxGridY = 65535;  // the expert kernels loop over pairs / tokens beyond it

__device__ __forceinline__ float HalfBitsLo(uint32_t h) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h & 0xffffu)));
}
// e4m3 byte as float * 2^-8 (exact).
__device__ __forceinline__ float E4m3Scaled(uint32_t b) { return HalfBitsLo(((b & 0x7fu) << 7) | ((b & 0x80u) << 8)); }

// One load of a row: G groups of 16 codes (2G words) and their G scale bytes.
template <int G>
struct Load {
  uint32_t w[2 * G];
  uint32_t sc;
};

// Loads per row of `cols` columns.
template <int G>
__device__ __forceinline__ int64_t LoadsPerRow(int64_t cols) {
  return cols / (16 * G);
}

template <int G>
__device__ __forceinline__ void LoadOne(Load<G>& l, const uint8_t* data, const uint8_t* gs, int64_t j) {
  if constexpr (G == 2) {
    const uint4 v = __ldcs(reinterpret_cast<const uint4*>(data) + j);
    l.w[0] = v.x, l.w[1] = v.y, l.w[2] = v.z, l.w[3] = v.w;
    l.sc = __ldcs(reinterpret_cast<const unsigned short*>(gs) + j);
  } else {
    const uint2 v = __ldcs(reinterpret_cast<const uint2*>(data) + j);
    l.w[0] = v.x, l.w[1] = v.y;
    l.sc = __ldcs(gs + j);
  }
}

// A load's group scales as e4m3 * 2^-8 (x: its first group, y: its second; G = 1 has only x). Both
// of a 16-byte load's come from one decode (E4m3x2HalfBits): these kernels are bound by their
// instructions, not their bytes, and decoding the two bytes apart cost NVFP4's batch-1 step 3.1% at
// 1k and 2.3% at 4k (H100, same run against main before it, 5 rounds;
// docs/bench/quant-decode-h200.md, session 46).
template <int G>
__device__ __forceinline__ float2 GroupScales(const Load<G>& l) {
  if constexpr (G == 2) {
    return HalfBitsToFloat2(E4m3x2HalfBits(l.sc));
  } else {
    return make_float2(E4m3Scaled(l.sc & 0xffu), 0.0f);
  }
}

// R rows of one matrix for a warp: their packed codes, group scales and second scale (times 2^22,
// which undoes the 2^-14 of the decoded codes and the 2^-8 of the decoded group scales).
template <int R>
struct Rows {
  const uint8_t* data[R];
  const uint8_t* gs[R];
  float scale2[R];
};

// Row r of a matrix whose arrays start at data, gs, rs2 (row_scale2 is weight data: read before
// any wait).
__device__ __forceinline__ void SetRow(const uint8_t* data, const uint8_t* gs, const float* rs2, int64_t cols,
                                       int64_t r, const uint8_t*& d, const uint8_t*& g, float& s) {
  d = data + r * (cols / 2);
  g = gs + r * (cols / 16);
  s = __ldg(rs2 + r) * 4194304.0f;  // 2^22
}

// Issues the NL loads of chunk `base` (in loads) of every row; loads past the row are skipped.
template <int R, int NL, int G>
__device__ __forceinline__ void LoadChunk(Load<G> (&buf)[R][NL], const Rows<R>& rows, int64_t base, int64_t nj,
                                          int lane) {
#pragma unroll
  for (int k = 0; k < NL; ++k) {
    const int64_t j = base + k * 32 + lane;
    if (j < nj) {
#pragma unroll
      for (int r = 0; r < R; ++r) LoadOne<G>(buf[r][k], rows.data[r], rows.gs[r], j);
    }
  }
}

// acc[r][t] += dot(chunk of row r in buf, x + t * cols) for t < nt: per 8 columns the codes of all R
// rows are decoded, then each token's 8 x values are read once and used for every row; per group
// the rows' partial sums are scaled once.
template <int R, int NL, int TT, int G>
__device__ __forceinline__ void UseChunk(float (&acc)[R][TT], const Load<G> (&buf)[R][NL], const Rows<R>& rows,
                                         const float* x, int64_t base, int64_t nj, int64_t cols, int nt, int lane) {
#pragma unroll
  for (int k = 0; k < NL; ++k) {
    const int64_t j = base + k * 32 + lane;
    if (j < nj) {
      float2 gs[R];
#pragma unroll
      for (int r = 0; r < R; ++r) gs[r] = GroupScales<G>(buf[r][k]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int64_t c = (j * G + g) * 16;
        float part[R][TT];
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int t = 0; t < TT; ++t) part[r][t] = 0.0f;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float w[R][8];
#pragma unroll
          for (int r = 0; r < R; ++r) E2m1x8ToFloat(buf[r][k].w[2 * g + h], w[r]);
#pragma unroll
          for (int t = 0; t < TT; ++t) {
            if (t < nt) {
              const float4* xp = reinterpret_cast<const float4*>(x + t * cols + c + 8 * h);
              const float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
              for (int r = 0; r < R; ++r) {
                part[r][t] += w[r][0] * a.x + w[r][1] * a.y + w[r][2] * a.z + w[r][3] * a.w + w[r][4] * b.x +
                              w[r][5] * b.y + w[r][6] * b.z + w[r][7] * b.w;
              }
            }
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float s = (g == 0 ? gs[r].x : gs[r].y) * rows.scale2[r];
#pragma unroll
          for (int t = 0; t < TT; ++t) acc[r][t] += part[r][t] * s;
        }
      }
    }
  }
}

// acc[r][t] (on every lane) = dot(row r, x + t * cols) for t < nt, the rows' first chunk already in
// buf (loaded before the kernel waited on its predecessor), the later chunks loaded here.
template <int R, int NL, int TT, int G>
__device__ __forceinline__ void RowsDotLoaded(float (&acc)[R][TT], Load<G> (&buf)[R][NL], const Rows<R>& rows,
                                              const float* x, int64_t cols, int nt, int lane) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = 0.0f;
  }
  const int64_t nj = LoadsPerRow<G>(cols);
  for (int64_t base = 0;;) {
    UseChunk<R, NL, TT, G>(acc, buf, rows, x, base, nj, cols, nt, lane);
    base += 32 * NL;
    if (base >= nj) break;
    LoadChunk<R, NL, G>(buf, rows, base, nj, lane);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = WarpSum(acc[r][t]);
  }
}

// ---- dense product ------------------------------------------------------------------------------

// Grid (ceil(rows / (kWarps * R)), ceil(T / TT)): warp w of block b computes rows (b*kWarps+w)*R .. +R
// for the TT tokens of tile blockIdx.y; rows past the end recompute row o0 and are dropped.
template <int R, int NL, int TT, int G>
__global__ void __launch_bounds__(kWarps * 32)
    MatmulNvfp4Kernel(float* y, const float* x, const uint8_t* data, const uint8_t* gs, const float* rs2, int64_t T,
                      int64_t cols, int64_t out) {
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * R;
  if (o0 >= out) return;
  Rows<R> rows;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    SetRow(data, gs, rs2, cols, o0 + r < out ? o0 + r : o0, rows.data[r], rows.gs[r], rows.scale2[r]);
  }
  Load<G> buf[R][NL];
  LoadChunk<R, NL, G>(buf, rows, 0, LoadsPerRow<G>(cols), lane);
  GridDepWait();
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * TT;
  const int nt = T - t0 < TT ? static_cast<int>(T - t0) : TT;
  float acc[R][TT];
  RowsDotLoaded<R, NL, TT, G>(acc, buf, rows, x + t0 * cols, cols, nt, lane);
  StoreRowsTile<R, TT>(y, acc, out, o0, t0, nt, lane);
}

template <int R, int NL, int TT, int G>
void LaunchMatmul(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t s) {
  const int64_t per_block = kWarps * R;
  const dim3 grid(static_cast<unsigned>((W.rows + per_block - 1) / per_block), static_cast<unsigned>((T + TT - 1) / TT));
  Launch(MatmulNvfp4Kernel<R, NL, TT, G>, grid, dim3(kWarps * 32), 0, s, y, x, static_cast<const uint8_t*>(W.data),
         W.group_scales, W.row_scale2, T, W.cols, W.rows);
}

// The shape of a token-tile product (T > 1; batch 1 takes the split kernel): NL loads per lane per
// row cover the row in one round where they can (up to 4: the tile's partial sums take registers),
// and 2 rows per warp (rows share each x read) as long as the grid still covers every SM.
template <int TT>
void LaunchMatmulTile(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t s) {
  const int64_t need = (W.cols / 32 + 31) / 32;
  const int nl = need <= 1 ? 1 : need <= 2 ? 2 : 4;
  const int r = (W.rows + kWarps * 2 - 1) / (kWarps * 2) < SmCount() ? 1 : 2;
  const int code = r * 10 + nl;
  switch (code) {
    case 21: LaunchMatmul<2, 1, TT, 2>(y, x, W, T, s); return;
    case 22: LaunchMatmul<2, 2, TT, 2>(y, x, W, T, s); return;
    case 24: LaunchMatmul<2, 4, TT, 2>(y, x, W, T, s); return;
    case 11: LaunchMatmul<1, 1, TT, 2>(y, x, W, T, s); return;
    case 12: LaunchMatmul<1, 2, TT, 2>(y, x, W, T, s); return;
    default: LaunchMatmul<1, 4, TT, 2>(y, x, W, T, s); return;
  }
}

// What the split products need of an NVFP4 matrix or stack of experts.
struct Nvfp4SplitMatrix {
  const uint8_t* data;
  const uint8_t* gs;
  const float* rs2;
  int32_t cols;
  int64_t data_stride = 0, gs_stride = 0, rs2_stride = 0;  // between the matrices of a stack (experts)
};

// The split products' view of an NVFP4 matrix (quant_split_matvec.cuh), 16-byte loads only
// (WideLoads): a load is 32 codes (two groups) and their two scale bytes; each group's 16 products
// are summed, then scaled once by its group scale and the row's second scale. kHalfSums picks how a
// group is summed: in float32 (FloatDot) or as half2 (HalfDot). kSplitX (float sums only): x is in
// split order (kernels/split_order.h), so a warp's x reads are contiguous.
template <bool kHalfSums, bool kSplitX = false>
struct Nvfp4SplitT {
  static_assert(!(kHalfSums && kSplitX), "the split-order x is read by the float sums only");
  using Matrix = Nvfp4SplitMatrix;
  __device__ static int cols(const Matrix& m) { return m.cols; }
  __device__ static Matrix Expert(const Matrix& stack, int64_t e) {
    Matrix m = stack;
    m.data += e * stack.data_stride;
    m.gs += e * stack.gs_stride;
    m.rs2 += e * stack.rs2_stride;
    return m;
  }
  struct Row {
    const uint8_t* data;
    const uint8_t* gs;
    float scale2;
  };
  using Raw = Load<2>;
  __device__ static int loads_per_row(const Matrix& m) { return m.cols / 32; }
  __device__ static Row RowOf(const Matrix& m, int64_t r) {
    Row row;
    SetRow(m.data, m.gs, m.rs2, m.cols, r, row.data, row.gs, row.scale2);
    return row;
  }
  __device__ static void Fetch(Raw& raw, const Matrix&, const Row& row, int j) { LoadOne<2>(raw, row.data, row.gs, j); }
  template <int R>
  __device__ static void Dot(float (&acc)[R], const Raw (&raw)[R], const Matrix& m, const Row (&rows)[R],
                             const float* x, int j) {
    float2 gs[R];  // columns 0-15 and 16-31
#pragma unroll
    for (int r = 0; r < R; ++r) gs[r] = GroupScales<2>(raw[r]);
    if constexpr (kHalfSums) {
      HalfDot<R>(acc, raw, gs, rows, x, j);
    } else {
      FloatDot<R>(acc, raw, gs, rows, x, j, m.cols >> 5);
    }
  }
  // Each code widened to float, a group's 16 products summed in float32. Load j's 32 x values: x + 32 j
  // in row order; with kSplitX its float4 s at s * loads + j (loads: a row's).
  template <int R>
  __device__ static void FloatDot(float (&acc)[R], const Raw (&raw)[R], const float2 (&gs)[R], const Row (&rows)[R],
                                  const float* x, int j, int loads) {
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      float part[R] = {};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float4 a, b;
        if constexpr (kSplitX) {
          const float4* xj = reinterpret_cast<const float4*>(x) + j;
          a = __ldg(xj + (4 * g + 2 * h) * loads), b = __ldg(xj + (4 * g + 2 * h + 1) * loads);
        } else {
          const float4* xp = reinterpret_cast<const float4*>(x + j * 32 + g * 16 + h * 8);
          a = __ldg(xp), b = __ldg(xp + 1);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float w[8];
          E2m1x8ToFloat(raw[r].w[2 * g + h], w);
          part[r] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z +
                     w[7] * b.w;
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] += part[r] * ((g == 0 ? gs[r].x : gs[r].y) * rows[r].scale2);
    }
  }
  // The codes stay the halves e2m1 * 2^-14 that the byte permutes make; each group's
  // 16 x values are rounded to half times a power of two S chosen from their largest magnitude m (m *
  // S < 2^15: the products, e2m1 * x * S * 2^-14, are at most 12 and normal down to x of about m *
  // 2^-14); a lane's 8 products of a group are summed as half2 (two chains of 4, then one add), then
  // widened and scaled by the group scale and 1 / S in float32. An inf or NaN x makes the sum inf or
  // NaN, as in float32.
  template <int R>
  __device__ static void HalfDot(float (&acc)[R], const Raw (&raw)[R], const float2 (&gs)[R], const Row (&rows)[R],
                                 const float* x, int j) {
    float sum[R] = {};
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const float4* xp = reinterpret_cast<const float4*>(x + j * 32 + g * 16);
      const float4 v[4] = {__ldg(xp), __ldg(xp + 1), __ldg(xp + 2), __ldg(xp + 3)};
      float mv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        mv[i] = fmaxf(fmaxf(fabsf(v[i].x), fabsf(v[i].y)), fmaxf(fabsf(v[i].z), fabsf(v[i].w)));
      }
      const uint32_t e = __float_as_uint(fmaxf(fmaxf(mv[0], mv[1]), fmaxf(mv[2], mv[3]))) >> 23;  // m < 2^(e-126)
      const float S = __uint_as_float(min(268u - e, 254u) << 23);        // 2^(141 - e), at most 2^127
      const float inv = __uint_as_float((e > 14u ? e - 14u : 0u) << 23);  // 1 / S (0 where m < 2^-112)
      // x as the half2 pairs of the decoded words: (0, 2), (4, 6), (1, 3), (5, 7) of each 8
      // (E2m1x8ToHalfPairs).
      __half2 xh[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 a = v[2 * h], b = v[2 * h + 1];
        xh[h][0] = __floats2half2_rn(a.x * S, a.z * S);
        xh[h][1] = __floats2half2_rn(b.x * S, b.z * S);
        xh[h][2] = __floats2half2_rn(a.y * S, a.w * S);
        xh[h][3] = __floats2half2_rn(b.y * S, b.w * S);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        __half2 c[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t wb[4];
          E2m1x8ToHalfPairs(raw[r].w[2 * g + h], wb);
          c[h] = __hmul2(HalfBits2(wb[0]), xh[h][0]);
#pragma unroll
          for (int q = 1; q < 4; ++q) c[h] = __hfma2(HalfBits2(wb[q]), xh[h][q], c[h]);
        }
        const float2 f = __half22float2(__hadd2(c[0], c[1]));
        sum[r] += (f.x + f.y) * ((g == 0 ? gs[r].x : gs[r].y) * inv);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] += sum[r] * rows[r].scale2;
  }
};

// One token takes the float32 sums everywhere; the experts of 2 to 8 tokens the half2 sums. At one
// token the kernels are one wave waiting on their loads (Nsight Compute: long-scoreboard stalls the
// largest part of each issue), and the half2 sums made the step slower although they issue 17% fewer
// instructions (H100, NVFP4 batch 1: +5.9% with the dense products too, +1.4% with the experts
// alone). Not because of the scale: with none at all (S a constant, measured only) they were slower
// still, +4.7% for the experts, and a scale per 8 columns lost too (+2.4%; session 48). A batch of 8
// runs eight times the blocks, in waves, and there they made the step 2.7% / 2.1% faster (1k / 4k;
// docs/bench/quant-decode-h200.md, sessions 47 and 48).
using Nvfp4Split = Nvfp4SplitT<false>;
using Nvfp4SplitHalfSums = Nvfp4SplitT<true>;
// One token's experts over x in split order (add_rmsnorm_matmul's xn_split): the NVFP4 batch-1 step
// 1.2% / 1.3% faster at 1k / 4k, main against main (H100; a knock-out that read no x at all gained no
// more; docs/bench/decode-h200.md, session 54). Its gate/up then stores act in split order too, and
// down reads it with the same policy: down 6.05 -> 5.18 us a layer, the step 1.0% / 0.9% faster
// (session 55).
using Nvfp4SplitOrderedX = Nvfp4SplitT<false, true>;

// go.operator()<P>() with the experts' policy for T tokens: float32 sums for one, half2 for more.
template <class F>
decltype(auto) WithExpertsSplit(int64_t T, F&& go) {
  return T == 1 ? go.template operator()<Nvfp4Split>() : go.template operator()<Nvfp4SplitHalfSums>();
}

// Whether W takes 16-byte loads: rows (and matrices) start on 16 bytes and scale pairs on 2.
bool WideLoads(const QuantMatrix& W) {
  return W.cols % 32 == 0 && reinterpret_cast<uintptr_t>(W.data) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(W.group_scales) % 2 == 0;
}

// Whether the experts' products of T tokens take their split-column kernels: moe_gate_up_nvfp4's and
// moe_down_nvfp4's dispatch, and moe_act_split_nvfp4, ask these. Down's launcher takes rows of at most
// kSplitDownMaxLoads loads.
bool SplitGateUp(const QuantMatrix& gate_up, int64_t T) {
  return WideLoads(gate_up) && T <= 8 && gate_up.cols < (int64_t{1} << 30);
}
bool SplitDown(const QuantMatrix& down, int64_t T) {
  return WideLoads(down) && T <= 8 && down.cols < (int64_t{1} << 30) && down.cols / 32 <= kSplitDownMaxLoads;
}

void RequireNvfp4(const QuantMatrix& W) {
  KERNEL_REQUIRE(W.format == WeightFormat::kNvfp4 && W.cols % 16 == 0);
  KERNEL_REQUIRE(W.data != nullptr && W.group_scales != nullptr && W.row_scale2 != nullptr);
  // Rows of a cols % 32 == 16 matrix start on 8 bytes: the narrow loads need that of the base too.
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(W.data) % 8 == 0);
}

// ---- experts ------------------------------------------------------------------------------------

// Grid (ceil(I / kGateUpWarps), min(T*K, kMaxGridY)): warp computes row i of gate and of up of expert
// ids[p] for pairs p = blockIdx.y, + gridDim.y, ..., both rows over the same x columns. The ids come
// from the router kernel, so nothing is loaded before GridDepWait; moe_down may launch only after
// that wait (its early loads read ids).
template <int G>
__global__ void __launch_bounds__(kGateUpWarps * 32)
    MoeGateUpNvfp4Kernel(float* act, const float* x, const int32_t* ids, const uint8_t* data, const uint8_t* gs,
                         const float* rs2, int64_t data_stride, int64_t gs_stride, int64_t pairs, int64_t K,
                         int64_t H, int64_t I) {
  const int lane = threadIdx.x % 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kGateUpWarps + threadIdx.x / 32;
  if (i >= I) return;
  GridDepWait();
  GridDepLaunchDependents();
  for (int64_t p = blockIdx.y; p < pairs; p += gridDim.y) {
    const int64_t e = ids[p];
    Rows<2> rows;
    const uint8_t* de = data + e * data_stride;
    const uint8_t* ge = gs + e * gs_stride;
    const float* se = rs2 + e * 2 * I;
    SetRow(de, ge, se, H, i, rows.data[0], rows.gs[0], rows.scale2[0]);
    SetRow(de, ge, se, H, I + i, rows.data[1], rows.gs[1], rows.scale2[1]);
    Load<G> buf[2][kGateUpLoads];
    LoadChunk<2, kGateUpLoads, G>(buf, rows, 0, LoadsPerRow<G>(H), lane);
    float gu[2][1];
    RowsDotLoaded<2, kGateUpLoads, 1, G>(gu, buf, rows, x + (p / K) * H, H, 1, lane);
    if (lane == 0) act[p * I + i] = SiluF(gu[0][0]) * gu[1][0];
  }
}

// Grid (ceil(H / kDownRows), min(T, kMaxGridY)): warp k of the block computes rows h0..h0+kDownRows of
// expert slots k, k+8, ... of tokens t = blockIdx.y, + gridDim.y, ... (weighted), the block sums the
// slots in a fixed order (deterministic). With `early` (this launch directly follows moe_gate_up's
// decode kernel, which lets it launch only after its own wait, so the router's ids are complete)
// each warp loads its first slot's first chunk before waiting for the activations.
template <int G>
__global__ void __launch_bounds__(kDownWarps * 32)
    MoeDownNvfp4Kernel(float* out, const float* act, const int32_t* ids, const float* weights, const uint8_t* data,
                       const uint8_t* gs, const float* rs2, int64_t data_stride, int64_t gs_stride, int64_t T,
                       int64_t K, int64_t H, int64_t I, bool early) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * kDownRows;
  __shared__ float partial[kDownWarps][kDownRows];
  Rows<kDownRows> rows;
  Load<G> buf[kDownRows][kDownLoads];
  const int64_t nj = LoadsPerRow<G>(I);
  const auto load_slot = [&](int64_t t, int64_t k) {  // rows past H recompute row h0 and are dropped
    const int64_t e = __ldcg(ids + t * K + k);
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      SetRow(data + e * data_stride, gs + e * gs_stride, rs2 + e * H, I, h0 + r < H ? h0 + r : h0, rows.data[r],
             rows.gs[r], rows.scale2[r]);
    }
    LoadChunk<kDownRows, kDownLoads, G>(buf, rows, 0, nj, lane);
  };
  if (early && warp < K) load_slot(blockIdx.y, warp);
  GridDepWait();
  // The next kernel launches after this wait, as in moe_down (kernels/moe.cu).
  GridDepLaunchDependents();
  for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
    const bool loaded = early && t == blockIdx.y;  // the first slot's chunk is in buf already
    float sum[kDownRows] = {};
    for (int64_t k = warp; k < K; k += kDownWarps) {
      if (k != warp || !loaded) load_slot(t, k);
      const int64_t p = t * K + k;
      float d[kDownRows][1];
      RowsDotLoaded<kDownRows, kDownLoads, 1, G>(d, buf, rows, act + p * I, I, 1, lane);
      const float wk = weights[p];
#pragma unroll
      for (int r = 0; r < kDownRows; ++r) sum[r] += wk * d[r][0];
    }
    StoreSlotSums<kDownWarps, kDownRows>(out + t * H, partial, sum, h0, H, warp, lane);
    __syncthreads();  // partial is rewritten for the next token
  }
}

// ---- dequantization -----------------------------------------------------------------------------

// One thread per 16-column group (8 code bytes, one scale byte, one row): 16 bf16 out, rounded to
// nearest even from the float32 value e2m1 * e4m3 * scale2 computed in the references' order.
__global__ void __launch_bounds__(256) DequantNvfp4Kernel(uint16_t* dst, uint16_t* rest, const uint8_t* data,
                                                           const uint8_t* gs, const float* rs2, int64_t groups,
                                                           int64_t groups_per_row) {
  GridDepLaunchDependents();
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const uint2 v = __ldcs(reinterpret_cast<const uint2*>(data) + g);
  const uint32_t b = __ldcs(gs + g);
  // e4m3 exactly, NaN code included (the 2^8 undoes E4m3Scaled's 2^-8).
  const float scale = (b & 0x7fu) == 0x7fu ? __int_as_float(0x7fc00000) : E4m3Scaled(b) * 256.0f;
  const float s2 = __ldg(rs2 + g / groups_per_row);
  float f[16];
  E2m1x8ToFloat(v.x, f);
  E2m1x8ToFloat(v.y, f + 8);
  uint32_t packed[8], packed_rest[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    // f * 2^14 is the code's e2m1 value (exact), times the scale exact too (few significant bits).
    const float lo = f[2 * i] * 16384.0f * scale * s2, hi = f[2 * i + 1] * 16384.0f * scale * s2;
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    memcpy(&packed[i], &h, 4);
    // The remainder (for `rest`): value - bf16(value), exact in float32, rounded to bf16 again.
    const float2 hf = __bfloat1622float2(h);
    const __nv_bfloat162 r = __floats2bfloat162_rn(lo - hf.x, hi - hf.y);
    memcpy(&packed_rest[i], &r, 4);
  }
  GridDepWait();  // an earlier kernel may still read dst
  uint4* o = reinterpret_cast<uint4*>(dst + g * 16);
  o[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  o[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  if (rest == nullptr) return;
  o = reinterpret_cast<uint4*>(rest + g * 16);
  o[0] = make_uint4(packed_rest[0], packed_rest[1], packed_rest[2], packed_rest[3]);
  o[1] = make_uint4(packed_rest[4], packed_rest[5], packed_rest[6], packed_rest[7]);
}

}  // namespace

void matmul_nvfp4(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream) {
  RequireNvfp4(W);
  KERNEL_REQUIRE(W.count == 1 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
  if (T == 0 || W.rows == 0) return;
  if (!WideLoads(W)) {
    // cols % 32 == 16 (or unaligned scales): one group per 8-byte load, a single shape.
    if (T == 1) {
      LaunchMatmul<1, 4, 1, 1>(y, x, W, T, stream);
    } else {
      LaunchMatmul<1, 4, 8, 1>(y, x, W, T, stream);
    }
  } else if (T == 1) {
    KERNEL_REQUIRE(W.cols < (int64_t{1} << 30));
    const Nvfp4SplitMatrix m{static_cast<const uint8_t*>(W.data), W.group_scales, W.row_scale2,
                             static_cast<int32_t>(W.cols)};
    LaunchSplitMatvec<Nvfp4Split>(y, x, m, W.cols / 32, W.rows, stream);
  } else if (T <= 4) {
    LaunchMatmulTile<4>(y, x, W, T, stream);
  } else if (T >= kMatmulBatchedMinTokens && matmul_nvfp4_batched(y, x, W, T, stream)) {
    return;  // checked there
  } else {
    LaunchMatmulTile<8>(y, x, W, T, stream);
  }
  KERNEL_CHECK();
}

void dequantize_nvfp4_bf16(bf16_bits* dst, const QuantMatrix& W, cudaStream_t stream, bf16_bits* lo) {
  RequireNvfp4(W);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(lo) % 16 == 0);
  const int64_t groups_per_row = W.cols / kNvfp4GroupSize;
  const int64_t groups = W.count * W.rows * groups_per_row;
  if (groups == 0) return;
  // The stack's arrays are flat: group g of the whole stack is bytes [8g, 8g+8), scale byte g, and
  // belongs to row g / groups_per_row of the (count * rows) row_scale2 entries.
  Launch(DequantNvfp4Kernel, dim3(static_cast<unsigned>((groups + 255) / 256)), dim3(256), 0, stream, dst, lo,
         static_cast<const uint8_t*>(W.data), W.group_scales, W.row_scale2, groups, groups_per_row);
  KERNEL_CHECK();
}

bool moe_act_split_nvfp4(const QuantMatrix& gate_up, const QuantMatrix& down, int64_t T) {
  // Both products take their one-token split kernels (gate/up over split-order x, down over
  // split-order act), and act's rows are whole float4 groups of the split order (I % 32: WideLoads
  // has down.cols % 32 == 0).
  return T == 1 && gate_up.format == WeightFormat::kNvfp4 && down.format == WeightFormat::kNvfp4 &&
         SplitGateUp(gate_up, T) && SplitDown(down, T) && down.cols == gate_up.rows / 2;
}

void moe_gate_up_nvfp4(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T,
                       int64_t K, cudaStream_t stream, L2Prefetch next, const float* x_split, bool act_split) {
  RequireNvfp4(gate_up);
  // act_split is stored by the split kernel over x_split alone (the other paths require it off).
  KERNEL_REQUIRE(!act_split || (T == 1 && x_split != nullptr));
  KERNEL_REQUIRE(gate_up.rows % 2 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
  if (T == 0 || K == 0 || gate_up.rows == 0) return;
  const int64_t H = gate_up.cols, I = gate_up.rows / 2;
  const dim3 grid(static_cast<unsigned>((I + kGateUpWarps - 1) / kGateUpWarps),
                  static_cast<unsigned>(std::min<int64_t>(T * K, kMaxGridY)));
  const auto* data = static_cast<const uint8_t*>(gate_up.data);
  const auto launch = [&](auto kernel) {
    Launch(kernel, grid, dim3(kGateUpWarps * 32), 0, stream, act, x, ids, data, gate_up.group_scales,
           gate_up.row_scale2, gate_up.data_bytes(), gate_up.group_scale_stride(), T * K, K, H, I);
  };
  // Decode sizes take the split-column kernel (H200, Qwen3-30B-A3B shapes: the decode step at batch
  // 1 ran in 2.698 ms against 3.126 with one row pair a warp, at batch 8 in 16.19 against 18.98;
  // docs/bench/quant-decode-h200.md); larger batches keep the warp-per-row kernel, not measured
  // against it.
  if (SplitGateUp(gate_up, T)) {
    const Nvfp4SplitMatrix stack{data, gate_up.group_scales, gate_up.row_scale2, static_cast<int32_t>(H),
                                 gate_up.data_bytes(), gate_up.group_scale_stride(), gate_up.row_scale2_stride()};
    if (T == 1 && x_split != nullptr) {
      KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(x_split) % 16 == 0);
      if (act_split) {
        LaunchSplitMoeGateUp<Nvfp4SplitOrderedX, true>(act, x_split, ids, stack, H / 32, I, K, 0, K, stream, next);
      } else {
        LaunchSplitMoeGateUp<Nvfp4SplitOrderedX>(act, x_split, ids, stack, H / 32, I, K, 0, K, stream, next);
      }
    } else {
      WithExpertsSplit(T, [&]<class P>() {
        LaunchSplitMoeGateUp<P>(act, x, ids, stack, H / 32, I, K, 0, T * K, stream, next);
      });
    }
  } else {
    KERNEL_REQUIRE(!act_split);
    if (WideLoads(gate_up)) {
      launch(MoeGateUpNvfp4Kernel<2>);
    } else {
      launch(MoeGateUpNvfp4Kernel<1>);
    }
  }
  KERNEL_CHECK();
}

void moe_down_nvfp4(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                    int64_t T, int64_t K, cudaStream_t stream, bool follows_gate_up, bool act_split) {
  RequireNvfp4(down);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(act) % 16 == 0);
  // Split-order act (one token) is read by the split kernel alone (the warp-per-row one requires it off).
  KERNEL_REQUIRE(!act_split || T == 1);
  if (T == 0 || down.rows == 0) return;
  const int64_t H = down.rows, I = down.cols;
  // Off the GEMM path moe_gate_up took its decode kernel too (the one that triggers late). The early
  // loads won their A/B for the bf16 kernel (moe.cu); they are always on here too.
  const bool early = follows_gate_up;
  const auto* data = static_cast<const uint8_t*>(down.data);
  // Up to 8 tokens take the split kernel (H200, Qwen3-30B-A3B shapes, decode step at batch 8: 15.78
  // ms against 16.27; at batch 1 2.677 against 2.696-2.699, inside the runs' spread).
  if (SplitDown(down, T)) {
    const Nvfp4SplitMatrix stack{data, down.group_scales, down.row_scale2, static_cast<int32_t>(I),
                                 down.data_bytes(), down.group_scale_stride(), down.row_scale2_stride()};
    const bool launched =
        act_split ? LaunchSplitMoeDown<Nvfp4SplitOrderedX>(out, act, ids, weights, stack, I / 32, H, T, K, early, stream)
                  : WithExpertsSplit(T, [&]<class P>() {
                      return LaunchSplitMoeDown<P>(out, act, ids, weights, stack, I / 32, H, T, K, early, stream);
                    });
    KERNEL_REQUIRE(launched);  // SplitDown holds the launcher's limits
    KERNEL_CHECK();
    return;
  }
  KERNEL_REQUIRE(!act_split);
  const dim3 grid(static_cast<unsigned>((H + kDownRows - 1) / kDownRows),
                  static_cast<unsigned>(std::min<int64_t>(T, kMaxGridY)));
  const auto launch = [&](auto kernel) {
    Launch(kernel, grid, dim3(kDownWarps * 32), 0, stream, out, act, ids, weights, data, down.group_scales,
           down.row_scale2, down.data_bytes(), down.group_scale_stride(), T, K, H, I, early);
  };
  if (WideLoads(down)) {
    launch(MoeDownNvfp4Kernel<2>);
  } else {
    launch(MoeDownNvfp4Kernel<1>);
  }
  KERNEL_CHECK();
}

}  // namespace tandem::kernels::detail
