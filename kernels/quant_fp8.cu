// Block-scaled FP8 weights (kernels/quant_weight.h, kFp8Block) at decode sizes: the products read
// the e4m3 bytes and their float32 block scales directly and dequantize in registers; prefill takes
// dequantize_fp8_bf16 and the bf16 GEMM. The structure is the bf16 decode kernels' (matmul.cu,
// matvec.cuh, moe.cu): a lane keeps whole 16-byte loads of a row in flight, so one load instruction
// of a warp reads 512 contiguous bytes (512 weights, twice the bf16 count), float32 accumulation,
// warp-shuffle sums in a fixed order, PDL through Launch(). The dense product of one token (batch-1
// decode) and the experts' down product of 2 to 8 tokens split each row's columns over a block's
// lanes instead (quant_split_matvec.cuh, Fp8Split).
//
// Scales: the 16 weights of one load (columns c .. c+15, c % 16 == 0) share one scale when
// block_in is a power of two >= 16 and col_phase % 16 == 0 (every real checkpoint: 128 x 128
// blocks, shards starting on 16-column boundaries): one cached 4-byte lookup per 16 weights. Any
// other layout looks up each weight's own scale (correct, slower; a shard would have to start off
// a 16-column boundary to need it). Either way a weight is e4m3 * scale in float32, as the
// reference dequantizes it.
#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/matmul_batched.h"
#include "kernels/quant_detail.h"
#include "kernels/quant_fp8.cuh"
#include "kernels/quant_split_matvec.cuh"

namespace tandem::kernels::detail {

namespace {

// One matrix's layout as the kernels index it (columns and scale columns fit 32 bits).
struct Fp8Geometry {
  int32_t cols = 0, scale_cols = 0, row_block = 1, block_in = 1, col_phase = 0;
  int32_t shift = -1;  // log2(block_in) when the 16 weights of a load share one scale, else -1
};

Fp8Geometry GeometryOf(const QuantMatrix& W) {
  KERNEL_REQUIRE(W.format == WeightFormat::kFp8Block);
  KERNEL_REQUIRE(W.cols % 16 == 0 && W.cols < (int64_t{1} << 30));
  KERNEL_REQUIRE(W.block_in > 0 && W.block_in < (int64_t{1} << 30) && W.row_block > 0 && W.col_phase >= 0 &&
                 W.col_phase < W.block_in);
  KERNEL_REQUIRE(W.row_block < (int64_t{1} << 31));
  // 16-byte loads of every row of every matrix (cols % 16 == 0 keeps the rows aligned).
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(W.data) % 16 == 0 && W.scales != nullptr);
  Fp8Geometry g;
  g.cols = static_cast<int32_t>(W.cols);
  g.scale_cols = static_cast<int32_t>(W.scale_cols());
  g.row_block = static_cast<int32_t>(W.row_block);
  g.block_in = static_cast<int32_t>(W.block_in);
  g.col_phase = static_cast<int32_t>(W.col_phase);
  g.shift = W.block_shift(16);
  return g;
}

// A row of matrix data/scales (one matrix of a stack): its bytes and its scale row.
struct Fp8Row {
  const uint8_t* data;
  const float* scales;
};

__device__ __forceinline__ Fp8Row RowOf(const uint8_t* data, const float* scales, int64_t r, const Fp8Geometry& g) {
  return {data + r * g.cols, scales + (r / g.row_block) * g.scale_cols};
}

// The scale of column `col` of a row with scale row `srow` (any layout). Scales are weights too
// (never written during a step): read-only cache.
__device__ __forceinline__ float ScaleAt(const float* srow, int col, const Fp8Geometry& g) {
  return __ldg(srow + (col + g.col_phase) / g.block_in);
}

// The one scale of columns c..c+15 (c % 16 == 0) when they share it (g.shift >= 0).
__device__ __forceinline__ float SharedScale(const float* srow, int c, const Fp8Geometry& g) {
  return __ldg(srow + ((c + g.col_phase) >> g.shift));
}

// One row's chunk as a lane holds it: NL 16-byte loads and, on the shared-scale path, their NL
// scales, loaded together so that the scales' latency overlaps the weights' (and, for the first
// chunk, precedes the kernel's wait: scales never change during a step either).
template <int NL>
struct Fp8Chunk {
  uint4 w[NL];
  float s[NL];
};

// Lane l of the chunk at column `base` (a multiple of 512 * NL) owns columns base + k*512 + l*16
// .. +16 for k < NL; loads past the row's end are skipped (their registers stay unused).
template <int NL, bool kShared>
__device__ __forceinline__ void LoadFp8Chunk(Fp8Chunk<NL>& ch, const Fp8Row& row, int base, const Fp8Geometry& g,
                                             int lane) {
#pragma unroll
  for (int k = 0; k < NL; ++k) {
    const int c = base + k * 512 + lane * 16;
    if (c < g.cols) {
      ch.w[k] = __ldcs(reinterpret_cast<const uint4*>(row.data + c));
      if constexpr (kShared) ch.s[k] = SharedScale(row.scales, c, g);
    }
  }
}

// acc[r][t] += dot(the chunk of row r in buf[r], x + t*cols) for r < R, t < nt (x float32, 16-byte
// aligned rows). The weights are widened four at a time and scaled as they are (the reference's
// own product e4m3 * scale, one multiply per weight); each float4 of x is loaded once for the R
// rows, so a token tile of TT reads x TT / R times per weight instead of TT times. One token with a
// shared scale (the experts' decode kernels) sums a load's 16 products first and scales the sum
// once, unrolled: half the instructions (Nsight Compute: 3.56M against 4.87M in moe_down), and the
// batch-1 step 2.24-2.28 ms against 2.30-2.33 with the per-weight multiply in moe_down.
template <int R, int NL, int TT, bool kShared>
__device__ __forceinline__ void UseFp8Chunk(float (&acc)[R][TT], const Fp8Chunk<NL> (&buf)[R], const Fp8Row (&rows)[R],
                                            const float* x, int base, const Fp8Geometry& g, int nt, int lane) {
#pragma unroll
  for (int k = 0; k < NL; ++k) {
    const int c = base + k * 512 + lane * 16;
    if (c >= g.cols) continue;
    if constexpr (TT == 1 && kShared) {
      float part[R] = {};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(x + c + 4 * q));
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float w[4];
          const uint4& raw = buf[r].w[k];
          Fp8x4ToFloat(q == 0 ? raw.x : q == 1 ? raw.y : q == 2 ? raw.z : raw.w, w);
          part[r] = fmaf(w[0], v.x, part[r]);
          part[r] = fmaf(w[1], v.y, part[r]);
          part[r] = fmaf(w[2], v.z, part[r]);
          part[r] = fmaf(w[3], v.w, part[r]);
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][0] = fmaf(part[r], buf[r].s[k], acc[r][0]);
    } else {
      // Not unrolled: unrolled, the compiler hoists the x loads of all four quarters (TT * 16 floats
      // a row chunk load) and the tile kernels needed 184 registers instead of 113 (ptxas -v, sm_90).
#pragma unroll 1
      for (int q = 0; q < 4; ++q) {
        float w[R][4];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint4& raw = buf[r].w[k];
          Fp8x4ToFloat(q == 0 ? raw.x : q == 1 ? raw.y : q == 2 ? raw.z : raw.w, w[r]);
#pragma unroll
          for (int j = 0; j < 4; ++j) w[r][j] *= kShared ? buf[r].s[k] : ScaleAt(rows[r].scales, c + 4 * q + j, g);
        }
#pragma unroll
        for (int t = 0; t < TT; ++t) {
          if (t < nt) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(x + t * g.cols + c + 4 * q));
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r][t] += w[r][0] * v.x + w[r][1] * v.y + w[r][2] * v.z + w[r][3] * v.w;
          }
        }
      }
    }
  }
}

// acc[r][t] (on every lane) = dot(rows[r], x + t*cols) for t < nt, r < R, the rows' first chunk
// already in buf (loaded before the kernel's wait where it can be), the later chunks loaded here.
// kShared: the geometry has g.shift >= 0 (one scale per 16-byte load); the kernels take it as a
// template argument so the per-element path's code (and registers) stay out of the hot kernels.
template <int R, int NL, int TT, bool kShared>
__device__ __forceinline__ void Fp8RowsDot(float (&acc)[R][TT], Fp8Chunk<NL> (&buf)[R], const Fp8Row (&rows)[R],
                                           const float* x, const Fp8Geometry& g, int nt, int lane) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = 0.0f;
  }
  for (int base = 0;;) {
    UseFp8Chunk<R, NL, TT, kShared>(acc, buf, rows, x, base, g, nt, lane);
    base += 512 * NL;
    if (base >= g.cols) break;
#pragma unroll
    for (int r = 0; r < R; ++r) LoadFp8Chunk<NL, kShared>(buf[r], rows[r], base, g, lane);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = WarpSum(acc[r][t]);
  }
}

// ---- dense product --------------------------------------------------------------------------

constexpr int kWarps = 8;
// Rows a warp computes together with a token tile (T > 1): each x load then serves kTileRows rows,
// which keeps the tile's x traffic from L1 (TT floats per weight) near the weight bytes' rate. One
// load per lane per row chunk: kTileRows * 512 bytes a warp in flight.
constexpr int kTileRows = 4;

// Grid (ceil(rows / (kWarps * R)), ceil(T / TT)): warp w of block b computes rows
// (b*kWarps + w)*R .. +R for the TT tokens of tile blockIdx.y. The rows' first chunk (NL loads a
// lane each) is issued before waiting on the previous kernel: weights and scales never change
// during a step.
template <int R, int NL, int TT, bool kShared>
__global__ void __launch_bounds__(kWarps * 32) MatmulFp8Kernel(float* y, const float* x, const uint8_t* w,
                                                               const float* scales, Fp8Geometry g, int64_t T,
                                                               int64_t out) {
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * R;
  if (o0 >= out) {
    GridDepWait();  // keeps the stream's order transitive even for the idle warps
    return;
  }
  Fp8Row rows[R];
  Fp8Chunk<NL> buf[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    rows[r] = RowOf(w, scales, o0 + r < out ? o0 + r : o0, g);  // rows past `out` are dropped
    LoadFp8Chunk<NL, kShared>(buf[r], rows[r], 0, g, lane);
  }
  GridDepWait();
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * TT;
  const int nt = T - t0 < TT ? static_cast<int>(T - t0) : TT;
  float acc[R][TT];
  Fp8RowsDot<R, NL, TT, kShared>(acc, buf, rows, x + t0 * g.cols, g, nt, lane);
  StoreRowsTile<R, TT>(y, acc, out, o0, t0, nt, lane);
}

template <int R, int NL, int TT, bool kShared = true>
void LaunchMatmul(float* y, const float* x, const QuantMatrix& W, const Fp8Geometry& g, int64_t T,
                  cudaStream_t stream) {
  const int64_t rows_per_block = kWarps * R;
  const dim3 grid(static_cast<unsigned>((W.rows + rows_per_block - 1) / rows_per_block),
                  static_cast<unsigned>((T + TT - 1) / TT));
  Launch(MatmulFp8Kernel<R, NL, TT, kShared>, grid, dim3(kWarps * 32), 0, stream, y, x,
         static_cast<const uint8_t*>(W.data), W.scales, g, T, W.rows);
}

// The split batch-1 product's view of an FP8 matrix (quant_split_matvec.cuh), for layouts where
// the 16 weights of a load share one scale (g.shift >= 0): a load is 16 e4m3 bytes and that scale;
// the 16 products are summed, then scaled once.
struct Fp8Split {
  struct Matrix {
    const uint8_t* data;
    const float* scales;
    Fp8Geometry g;
    int64_t data_stride = 0, scale_stride = 0;  // between the matrices of a stack (experts)
  };
  using Row = Fp8Row;
  __device__ static int cols(const Matrix& m) { return m.g.cols; }
  __device__ static Matrix Expert(const Matrix& stack, int64_t e) {
    Matrix m = stack;
    m.data += e * stack.data_stride;
    m.scales += e * stack.scale_stride;
    return m;
  }
  struct Raw {
    uint4 w;
    float s;
  };
  __device__ static int loads_per_row(const Matrix& m) { return m.g.cols / 16; }
  __device__ static Row RowOf(const Matrix& m, int64_t r) {
    return tandem::kernels::detail::RowOf(m.data, m.scales, r, m.g);
  }
  __device__ static void Fetch(Raw& raw, const Matrix& m, const Row& row, int j) {
    raw.w = __ldcs(reinterpret_cast<const uint4*>(row.data) + j);
    raw.s = SharedScale(row.scales, j * 16, m.g);
  }
  template <int R>
  __device__ static void Dot(float (&acc)[R], const Raw (&raw)[R], const Matrix&, const Row (&)[R], const float* x,
                             int j) {
    float part[R] = {};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(x) + 4 * j + q);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float w[4];
        Fp8x4ToFloat(q == 0 ? raw[r].w.x : q == 1 ? raw[r].w.y : q == 2 ? raw[r].w.z : raw[r].w.w, w);
        part[r] += w[0] * v.x + w[1] * v.y + w[2] * v.z + w[3] * v.w;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] += part[r] * raw[r].s;
  }
};

// ---- dequantization to bf16 (prefill) -------------------------------------------------------

constexpr int kDequantThreads = 256;

// Grid (ceil(rows * cols / 16 / kDequantThreads), count): each thread converts one 16-byte load
// (16 weights of one row) of matrix blockIdx.y and stores 32 bytes of bf16. The weight load goes
// before the wait; the store after it (an earlier kernel may still read dst).
__global__ void __launch_bounds__(kDequantThreads) DequantizeFp8Kernel(bf16_bits* dst, bf16_bits* lo,
                                                                       const uint8_t* w, const float* scales,
                                                                       Fp8Geometry g, int64_t rows,
                                                                       int64_t scale_stride) {
  GridDepLaunchDependents();
  const int64_t e = blockIdx.y;
  const int64_t per_row = g.cols / 16;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kDequantThreads + threadIdx.x;
  const bool live = i < rows * per_row;
  const int64_t r = live ? i / per_row : 0;
  const int c = live ? static_cast<int>(i - r * per_row) * 16 : 0;
  const int64_t offset = (e * rows + r) * g.cols + c;  // of this load in the stack, in elements
  uint4 raw = {};
  if (live) raw = __ldcs(reinterpret_cast<const uint4*>(w + offset));
  GridDepWait();
  if (!live) return;
  float v[16];
  Fp8x16ToFloat(raw, v);
  const float* srow = scales + e * scale_stride + (r / g.row_block) * g.scale_cols;
  if (g.shift >= 0) {
    const float s = SharedScale(srow, c, g);
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] *= s;
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] *= ScaleAt(srow, c + j, g);
  }
  uint32_t packed[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);  // .x: the lower address
    packed[j] = *reinterpret_cast<const uint32_t*>(&b);
    // The remainder, when asked for: v - bf16(v) is exact in float32, rounded once more to bf16.
    const float2 h = __bfloat1622float2(b);
    v[2 * j] -= h.x;
    v[2 * j + 1] -= h.y;
  }
  uint4* out = reinterpret_cast<uint4*>(dst + offset);
  out[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  out[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  if (lo == nullptr) return;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
    packed[j] = *reinterpret_cast<const uint32_t*>(&b);
  }
  out = reinterpret_cast<uint4*>(lo + offset);
  out[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  out[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
}

// ---- routed experts -------------------------------------------------------------------------

constexpr int kGateUpWarps = 4;
constexpr int kDownWarps = 8;  // one warp per expert slot k (k, k+8, ... when K > 8)
constexpr int kDownRows = 4;   // output rows per block in moe_down
// One load per lane per row chunk, as the bf16 expert kernels measured best (moe.cu): more
// resident blocks beat more loads per warp. At FP8 a 2048-wide gate/up row is 4 such rounds.
constexpr int kMoeLoads = 1;
// Row pairs (gate row i, up row i) a gate_up warp computes together, sharing every x value. At FP8
// a lane reads 64 bytes of float32 x per 16 weight bytes, so with one pair a warp the x loads, not the
// weights, filled L1 (Nsight Compute, batch 1: 78% L1/TEX throughput, DRAM 38%, 13.9 us); two pairs
// halve them (11.1 us). Batch-1 / 8 decode step on the H200, Qwen3-30B-A3B FP8: 2.24-2.28 / 11.56-11.73
// ms against 2.43-2.47 / 12.59-12.84 with one pair; four pairs (128 registers) 2.36-2.39. The bf16
// kernel (x per weight byte half of FP8's) did not gain from two pairs (2.99 against 2.99 ms).
constexpr int kGateUpPairs = 2;
// Resident blocks an SM must hold so that a batch-1 layer of Qwen3-30B-A3B runs in one wave on the
// H200's 132 SMs, as the bf16 kernels do: gate_up has 8 * 768 / (4 * 2) = 768 blocks (6 an SM: 80
// registers, no spill), down 2048 / 4 = 512 (4 an SM: 64 registers, unbounded 73, a
// 48-byte spill on sm_90). sm_12x (GB10: 48 SMs, several waves anyway) spilled 84 bytes at 64
// registers in moe_down, so it keeps 3 blocks there (80 registers, a 36-byte spill; the bound only
// reaches the device pass).
constexpr int kGateUpBlocksPerSm = 6;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kDownBlocksPerSm = 3;
#else
constexpr int kDownBlocksPerSm = 4;
#endif

// Grid (ceil(I / (kGateUpWarps * kGateUpPairs)), pairs of this launch, at most 65535): the warp
// computes rows i .. i + kGateUpPairs - 1 of gate and of up (rows i and I + i of expert ids[p]) for
// pair p = p0 + blockIdx.y, all its rows' chunks in flight together (rows past I recompute row i and
// are not stored). (One block row per pair and a launch per 65535 pairs: a loop over pairs in the
// kernel cost registers and spilled.) The expert id comes from the router kernel, so nothing is
// loaded before GridDepWait, and moe_down may launch only after that wait (it then reads the ids
// early, see MoeDownFp8Kernel).
template <bool kShared>
__global__ void __launch_bounds__(kGateUpWarps * 32, kGateUpBlocksPerSm)
    MoeGateUpFp8Kernel(float* act, const float* x, const int32_t* ids, const uint8_t* w, const float* scales,
                       Fp8Geometry g, int64_t I, int64_t data_stride, int64_t scale_stride, int64_t K,
                       int64_t p0, L2Prefetch next) {
  constexpr int RP = kGateUpPairs;
  const int lane = threadIdx.x % 32;
  const int64_t i0 = (static_cast<int64_t>(blockIdx.x) * kGateUpWarps + threadIdx.x / 32) * RP;
  const int64_t p = p0 + blockIdx.y;
  PrefetchL2(next);
  GridDepWait();
  GridDepLaunchDependents();
  if (i0 >= I) return;
  const int64_t e = ids[p];
  const uint8_t* we = w + e * data_stride;
  const float* se = scales + e * scale_stride;
  Fp8Row rows[2 * RP];
#pragma unroll
  for (int r = 0; r < RP; ++r) {
    const int64_t i = i0 + r < I ? i0 + r : i0;
    rows[2 * r] = RowOf(we, se, i, g);          // gate row i
    rows[2 * r + 1] = RowOf(we, se, I + i, g);  // up row i
  }
  Fp8Chunk<kMoeLoads> buf[2 * RP];
#pragma unroll
  for (int r = 0; r < 2 * RP; ++r) LoadFp8Chunk<kMoeLoads, kShared>(buf[r], rows[r], 0, g, lane);
  float gu[2 * RP][1];
  Fp8RowsDot<2 * RP, kMoeLoads, 1, kShared>(gu, buf, rows, x + (p / K) * g.cols, g, 1, lane);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < RP; ++r) {
      if (i0 + r < I) act[p * I + i0 + r] = SiluF(gu[2 * r][0]) * gu[2 * r + 1][0];
    }
  }
}

// Grid (ceil(H / kDownRows), T): warp k of the block computes rows h0..h0+kDownRows of expert slots
// k, k+8, ... of token t (weighted); the block sums the slots in a fixed order (deterministic).
// With `early` (this launch directly follows moe_gate_up's decode kernel, which lets it launch only
// after its own wait, so the router's ids are complete when it starts) each warp issues the first
// chunk of its first slot's rows before waiting for the activations, overlapping moe_gate_up.
template <bool kShared>
__global__ void __launch_bounds__(kDownWarps * 32, kDownBlocksPerSm)
    MoeDownFp8Kernel(float* out, const float* act, const int32_t* ids, const float* weights, const uint8_t* w,
                     const float* scales, Fp8Geometry g, int64_t H, int64_t data_stride, int64_t scale_stride,
                     int64_t K, bool early) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * kDownRows, t = blockIdx.y;
  __shared__ float partial[kDownWarps][kDownRows];
  Fp8Row rows[kDownRows];
  Fp8Chunk<kMoeLoads> buf[kDownRows];
  const auto load_slot = [&](int64_t k) {  // rows past H recompute row h0 and are dropped
    const int64_t e = __ldcg(ids + t * K + k);
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      rows[r] = RowOf(w + e * data_stride, scales + e * scale_stride, h0 + r < H ? h0 + r : h0, g);
      LoadFp8Chunk<kMoeLoads, kShared>(buf[r], rows[r], 0, g, lane);
    }
  };
  if (early && warp < K) load_slot(warp);
  GridDepWait();
  // The next kernel launches after this wait, as in moe_down (kernels/moe.cu).
  GridDepLaunchDependents();
  float sum[kDownRows] = {};
  for (int64_t k = warp; k < K; k += kDownWarps) {
    if (k != warp || !early) load_slot(k);
    const int64_t p = t * K + k;
    float d[kDownRows][1];
    Fp8RowsDot<kDownRows, kMoeLoads, 1, kShared>(d, buf, rows, act + p * g.cols, g, 1, lane);
    const float wk = weights[p];
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) sum[r] += wk * d[r][0];
  }
  StoreSlotSums<kDownWarps, kDownRows>(out + t * H, partial, sum, h0, H, warp, lane);
}

}  // namespace

void matmul_fp8(float* y, const float* x, const QuantMatrix& W, int64_t T, cudaStream_t stream) {
  const Fp8Geometry g = GeometryOf(W);
  KERNEL_REQUIRE(W.count == 1 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
  if (T == 0 || W.rows == 0) return;
  if (g.shift < 0) {  // per-element scales (no real checkpoint): one token and one row at a time
    KERNEL_REQUIRE(T <= 65535);
    LaunchMatmul<1, 1, 1, false>(y, x, W, g, T, stream);
  } else if (T == 1) {
    LaunchSplitMatvec<Fp8Split>(y, x, Fp8Split::Matrix{static_cast<const uint8_t*>(W.data), W.scales, g}, W.cols / 16,
                                W.rows, stream);
  } else if (T <= 4) {
    LaunchMatmul<kTileRows, 1, 4>(y, x, W, g, T, stream);
  } else if (T >= kMatmulBatchedMinTokens && matmul_fp8_batched(y, x, W, T, stream)) {
    return;  // checked there
  } else {
    KERNEL_REQUIRE((T + 7) / 8 <= 65535);
    LaunchMatmul<kTileRows, 1, 8>(y, x, W, g, T, stream);
  }
  KERNEL_CHECK();
}

void dequantize_fp8_bf16(bf16_bits* dst, const QuantMatrix& W, cudaStream_t stream, bf16_bits* lo) {
  const Fp8Geometry g = GeometryOf(W);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(lo) % 16 == 0 &&
                 W.count <= 65535);
  if (W.count == 0 || W.rows == 0 || W.cols == 0) return;
  const int64_t loads = W.rows * W.cols / 16;  // per matrix
  const dim3 grid(static_cast<unsigned>((loads + kDequantThreads - 1) / kDequantThreads),
                  static_cast<unsigned>(W.count));
  Launch(DequantizeFp8Kernel, grid, dim3(kDequantThreads), 0, stream, dst, lo,
         static_cast<const uint8_t*>(W.data), W.scales, g, W.rows, W.scale_stride());
  KERNEL_CHECK();
}

void moe_gate_up_fp8(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T, int64_t K,
                     cudaStream_t stream, L2Prefetch next) {
  const Fp8Geometry g = GeometryOf(gate_up);
  KERNEL_REQUIRE(gate_up.rows % 2 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0);
  if (T == 0 || K == 0 || gate_up.rows == 0) return;
  const int64_t I = gate_up.rows / 2;
  const auto kernel = g.shift >= 0 ? MoeGateUpFp8Kernel<true> : MoeGateUpFp8Kernel<false>;
  for (int64_t p0 = 0; p0 < T * K; p0 += 65535) {
    const int64_t pairs = T * K - p0 < 65535 ? T * K - p0 : 65535;
    const int64_t per_block = kGateUpWarps * kGateUpPairs;
    const dim3 grid(static_cast<unsigned>((I + per_block - 1) / per_block), static_cast<unsigned>(pairs));
    Launch(kernel, grid, dim3(kGateUpWarps * 32), 0, stream, act, x, ids, static_cast<const uint8_t*>(gate_up.data),
           gate_up.scales, g, I, gate_up.data_bytes(), gate_up.scale_stride(), K, p0, p0 == 0 ? next : L2Prefetch{});
  }
  KERNEL_CHECK();
}

void moe_down_fp8(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                  int64_t T, int64_t K, cudaStream_t stream, bool follows_gate_up) {
  const Fp8Geometry g = GeometryOf(down);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(act) % 16 == 0 && T <= 65535);
  if (T == 0 || down.rows == 0) return;
  // The early loads won their A/B for the bf16 kernel (moe.cu); they are always on here too.
  const bool early = follows_gate_up;
  // 2 to 8 tokens take the split kernel (H200, Qwen3-30B-A3B shapes, decode step at batch 8: 14.57
  // ms against 15.09); one token keeps the warp-per-slot kernel below (2.514-2.543 against 2.574).
  if (g.shift >= 0 && T >= 2 && T <= 8) {
    const Fp8Split::Matrix stack{static_cast<const uint8_t*>(down.data), down.scales, g, down.data_bytes(),
                                 down.scale_stride()};
    if (LaunchSplitMoeDown<Fp8Split>(out, act, ids, weights, stack, down.cols / 16, down.rows, T, K, early, stream)) {
      KERNEL_CHECK();
      return;
    }
  }
  const dim3 grid(static_cast<unsigned>((down.rows + kDownRows - 1) / kDownRows), static_cast<unsigned>(T));
  Launch(g.shift >= 0 ? MoeDownFp8Kernel<true> : MoeDownFp8Kernel<false>, grid, dim3(kDownWarps * 32), 0, stream,
         out, act, ids, weights, static_cast<const uint8_t*>(down.data), down.scales, g, down.rows,
         down.data_bytes(), down.scale_stride(), K, early);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels::detail
