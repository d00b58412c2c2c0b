#include "kernels/moe_gemm.h"

#include <mma.h>

#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/gemm.h"
#include "kernels/launch.cuh"
#include "kernels/moe_gemm_mma.cuh"
#include "kernels/moe_pairs.cuh"

namespace tandem::kernels {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBM = 64;           // pairs per tile
constexpr int kBN = 128;          // weight rows per tile (gate_up: 64 gate + the 64 matching up rows)
constexpr int kBK = 32;           // reduction step held in shared memory (double-buffered)
constexpr int kLds = kBK + 8;     // bf16 row stride in shared memory: 80 bytes, off the bank period
constexpr int kLdc = kBN + 4;     // float row stride of the output tile
constexpr int kThreads = 256;     // 8 warps, each a 32x32 piece of the 64x128 tile

constexpr int kPipeBytes = 2 * (kBM + kBN) * kLds * 2;
constexpr int kOutBytes = kBM * kLdc * 4;
// Weights and activations as bf16 hi + lo: a second pipeline for the lo parts after the first,
// 60 KB, over the 48 KB of static shared memory, so it is dynamic.
constexpr int kSplitSmemBytes = 2 * kPipeBytes > kOutBytes ? 2 * kPipeBytes : kOutBytes;

enum class MoeOp { kGateUp, kDown };

// The tile's outputs from Cs (kBM x kBN floats): gate_up act[p][n0 + c] = silu(gate) * up, down
// part[p][n0 + c] = weights[p] * product, for the tile's `rows` pairs.
template <MoeOp op>
__device__ __forceinline__ void StoreTile(float* dst, const float (*Cs)[kLdc], const int* pair_of, int rows,
                                          const float* weights, int64_t n0, int64_t H, int64_t I) {
  const int tid = threadIdx.x;
  if constexpr (op == MoeOp::kGateUp) {
    // act[p][n0 + c] = silu(gate) * up: 64 rows x 16 float4.
#pragma unroll
    for (int j = 0; j < (kBM * kBN / 2 / 4) / kThreads; ++j) {
      const int idx = tid + j * kThreads;
      const int r = idx / 16, c = (idx % 16) * 4;
      if (r >= rows) continue;
      const float4 g = *reinterpret_cast<const float4*>(&Cs[r][c]);
      const float4 u = *reinterpret_cast<const float4*>(&Cs[r][kBN / 2 + c]);
      const float4 v = make_float4(SiluF(g.x) * u.x, SiluF(g.y) * u.y, SiluF(g.z) * u.z, SiluF(g.w) * u.w);
      *reinterpret_cast<float4*>(dst + static_cast<int64_t>(pair_of[r]) * I + n0 + c) = v;
    }
  } else {
    // part[p][n0 + c] = weights[p] * product: 64 rows x 32 float4.
#pragma unroll
    for (int j = 0; j < (kBM * kBN / 4) / kThreads; ++j) {
      const int idx = tid + j * kThreads;
      const int r = idx / 32, c = (idx % 32) * 4;
      if (r >= rows || n0 + c >= H) continue;
      const int64_t p = pair_of[r];
      const float wp = weights[p];
      const float4 s = *reinterpret_cast<const float4*>(&Cs[r][c]);
      *reinterpret_cast<float4*>(dst + p * H + n0 + c) = make_float4(wp * s.x, wp * s.y, wp * s.z, wp * s.w);
    }
  }
}

// Grid (tile_bound, n tiles). A: the pairs' float32 rows (gate_up: x[p / K], H wide; down: act[p],
// I wide). B: 128 rows of the expert's weights. See moe_gemm.h for what each op writes.
// The float32-grade (split) products: w_lo holds the weights' bf16 remainders (same layout as
// w_all), A is split into hi = bf16(a) and lo = bf16(a - hi) as it is stored, and each k step adds
// hi*W + lo*W + hi*W_lo (kernels/gemm.h gemm_bf16_split's three products, on this kernel's tiles).
// The bf16 products take the mma.sync kernel (moe_gemm_mma.cuh).
template <MoeOp op>
__global__ void __launch_bounds__(kThreads) MoeGroupedSplitKernel(float* dst, const float* a, const int32_t* sorted,
                                                             const int4* tiles, const float* weights,
                                                             const uint16_t* w_all, const uint16_t* w_lo,
                                                             int64_t K, int64_t H, int64_t I) {
  const int4 tile = tiles[blockIdx.x];
  if (tile.x < 0) return;  // past the last tile of this step
  const int64_t e = tile.x;
  const int rows = tile.z;
  const int64_t kdim = op == MoeOp::kGateUp ? H : I;
  const int64_t rows_per_expert = op == MoeOp::kGateUp ? 2 * I : H;
  const uint16_t* we = w_all + e * rows_per_expert * kdim;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * (op == MoeOp::kGateUp ? kBN / 2 : kBN);

  extern __shared__ __align__(128) unsigned char smem[];  // kSplitSmemBytes
  __shared__ int pair_of[kBM];
  auto As = reinterpret_cast<__nv_bfloat16(*)[kBM][kLds]>(smem);                       // [2][kBM][kLds]
  auto Bs = reinterpret_cast<__nv_bfloat16(*)[kBN][kLds]>(smem + 2 * kBM * kLds * 2);  // [2][kBN][kLds]
  // The lo parts, laid out as As / Bs one pipeline further on.
  auto Al = reinterpret_cast<__nv_bfloat16(*)[kBM][kLds]>(smem + kPipeBytes);
  auto Bl = reinterpret_cast<__nv_bfloat16(*)[kBN][kLds]>(smem + kPipeBytes + 2 * kBM * kLds * 2);
  auto Cs = reinterpret_cast<float(*)[kLdc]>(smem);  // [kBM][kLdc], after the main loop

  const int tid = threadIdx.x;
  if (tid < kBM) pair_of[tid] = tid < rows ? sorted[tile.y + tid] : -1;
  __syncthreads();

  // Each k step a thread moves 2 float4 of A (64 rows x 8) and 2 uint4 of B (128 rows x 4);
  // rows past the tile (A) or past H (B, down) load zeros.
  const float* a_src[2];
  const uint16_t* b_src[2];
  int a_r[2], a_c[2], b_r[2], b_c[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int ia = tid + j * kThreads;
    a_r[j] = ia / 8, a_c[j] = (ia % 8) * 4;
    const int p = pair_of[a_r[j]];
    a_src[j] = p < 0 ? nullptr : a + (op == MoeOp::kGateUp ? (p / K) * H : p * I) + a_c[j];
    const int ib = tid + j * kThreads;
    b_r[j] = ib / 4, b_c[j] = (ib % 4) * 8;
    int64_t wrow;
    if (op == MoeOp::kGateUp) {
      wrow = b_r[j] < kBN / 2 ? n0 + b_r[j] : I + n0 + (b_r[j] - kBN / 2);
    } else {
      wrow = n0 + b_r[j];
    }
    b_src[j] = wrow < rows_per_expert ? we + wrow * kdim + b_c[j] : nullptr;
  }
  float4 ra[2];
  uint4 rb[2], rbl[2];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      ra[j] = a_src[j] ? *reinterpret_cast<const float4*>(a_src[j] + k0) : make_float4(0.f, 0.f, 0.f, 0.f);
      rb[j] = b_src[j] ? __ldg(reinterpret_cast<const uint4*>(b_src[j] + k0)) : make_uint4(0, 0, 0, 0);
      // The same element of w_lo, its address formed here: fewer live registers.
      const uint16_t* lo = b_src[j] ? w_lo + (b_src[j] - w_all) + k0 : nullptr;
      rbl[j] = lo ? __ldg(reinterpret_cast<const uint4*>(lo)) : make_uint4(0, 0, 0, 0);
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      __nv_bfloat162 lo = __floats2bfloat162_rn(ra[j].x, ra[j].y), hi = __floats2bfloat162_rn(ra[j].z, ra[j].w);
      uint2 packed;
      packed.x = *reinterpret_cast<uint32_t*>(&lo);
      packed.y = *reinterpret_cast<uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(&As[buf][a_r[j]][a_c[j]]) = packed;
      *reinterpret_cast<uint4*>(&Bs[buf][b_r[j]][b_c[j]]) = rb[j];
      // The activations' remainders: a - bf16(a) is exact in float32, rounded to bf16 once more.
      const float2 l2 = __bfloat1622float2(lo), h2 = __bfloat1622float2(hi);
      __nv_bfloat162 rl = __floats2bfloat162_rn(ra[j].x - l2.x, ra[j].y - l2.y);
      __nv_bfloat162 rh = __floats2bfloat162_rn(ra[j].z - h2.x, ra[j].w - h2.y);
      packed.x = *reinterpret_cast<uint32_t*>(&rl);
      packed.y = *reinterpret_cast<uint32_t*>(&rh);
      *reinterpret_cast<uint2*>(&Al[buf][a_r[j]][a_c[j]]) = packed;
      *reinterpret_cast<uint4*>(&Bl[buf][b_r[j]][b_c[j]]) = rbl[j];
    }
  };

  const int warp = tid / 32;
  const int wm = (warp / 4) * 32, wn = (warp % 4) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }

  const int64_t nk = kdim / kBK;
  load(0);
  store(0);
  __syncthreads();
  for (int64_t kt = 0; kt < nk; ++kt) {
    const int buf = static_cast<int>(kt & 1);
    if (kt + 1 < nk) load((kt + 1) * kBK);  // in flight during the MMAs below
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      // B = W^T: element (k, n) is Bs[n][k], i.e. column-major with ldm kLds.
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &As[buf][wm + 16 * i][kk], kLds);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[buf][wn + 16 * j][kk], kLds);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
      // lo(A) * hi(W), then hi(A) * lo(W), loaded one operand at a time to hold few fragments.
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &Al[buf][wm + 16 * i][kk], kLds);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &As[buf][wm + 16 * i][kk], kLds);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bl[buf][wn + 16 * j][kk], kLds);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
    }
    // The other buffer was last read in iteration kt-1, before the barrier that ended it.
    if (kt + 1 < nk) store(buf ^ 1);
    __syncthreads();
  }
  // Cs overlays As/Bs: the barrier ending the last iteration ordered every read of them.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(&Cs[wm + 16 * i][wn + 16 * j], acc[i][j], kLdc, wmma::mem_row_major);
    }
  }
  __syncthreads();

  StoreTile<op>(dst, Cs, pair_of, rows, weights, n0, H, I);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Scratch slot 1: the tile table and the sorted pairs.
size_t SortBytes(int64_t n_pairs) { return MoeSortBytes(n_pairs, kBM); }
// Scratch slot 2: moe_down_grouped's weighted partial rows.
size_t PartialBytes(int64_t T, int64_t K, int64_t H) { return static_cast<size_t>(T * K * H) * sizeof(float); }
// Scratch slot 3: the activations rounded to bf16 (gate_up's x, then down's act).
size_t RoundedBytes(int64_t T, int64_t K, int64_t H, int64_t I) {
  return static_cast<size_t>(std::max(T * H, T * K * I)) * sizeof(bf16_bits);
}
// Scratch slot 4: moe_grouped's activations, written by gate_up in bf16 for down.
size_t FusedActBytes(int64_t T, int64_t K, int64_t I) { return static_cast<size_t>(T * K * I) * sizeof(bf16_bits); }
bool SizesSupported(int64_t H, int64_t I) { return H % 64 == 0 && I % 64 == 0 && H > 0 && I > 0; }

MoeSorted SortPairs(const int32_t* ids, int64_t n_pairs, cudaStream_t stream) {
  return MoeSortPairs(StreamScratch(stream, 1, SortBytes(n_pairs)), ids, n_pairs, kBM, kMaxExperts, stream);
}

}  // namespace

bool MoeGroupedSupported(const float* x, const bf16_bits* w, int64_t H, int64_t I) {
  return SizesSupported(H, I) && Aligned16(x) && Aligned16(w);
}

namespace {

// The split products: MoeGroupedSplitKernel<op> (float32 activations split into bf16 hi + lo in
// shared memory), with its dynamic shared memory.
template <MoeOp op>
void LaunchSplit(cudaStream_t stream, float* dst, const float* a, const MoeSorted& s, const float* weights,
                 const bf16_bits* w, const bf16_bits* w_lo, int64_t K, int64_t H, int64_t I) {
  const int64_t outputs_per_block = op == MoeOp::kGateUp ? kBN / 2 : kBN;
  const dim3 grid(static_cast<unsigned>(s.tile_bound),
                  static_cast<unsigned>(((op == MoeOp::kGateUp ? I : H) + outputs_per_block - 1) / outputs_per_block));
  // Per function and device; cheap to repeat, and prefill steps are never captured.
  CUDA_CHECK(cudaFuncSetAttribute(MoeGroupedSplitKernel<op>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  kSplitSmemBytes));
  MoeGroupedSplitKernel<op><<<grid, kThreads, kSplitSmemBytes, stream>>>(dst, a, s.sorted, s.tiles, weights, w, w_lo,
                                                                         K, H, I);
  KERNEL_CHECK();
}

// moe_mma::MoeGroupedMmaKernel<op, kStages, Out>, its shared memory allowed on each call (cheap,
// and prefill steps are never captured).
template <moe_mma::Op op, int kStages, typename Out>
void LaunchMmaStages(dim3 grid, cudaStream_t stream, Out* dst, const uint16_t* a, const MoeSorted& s,
                     const float* weights, const uint16_t* w, int n_blocks, int64_t K, int64_t H, int64_t I) {
  constexpr int bytes = moe_mma::SmemBytes(kStages);
  CUDA_CHECK(cudaFuncSetAttribute(moe_mma::MoeGroupedMmaKernel<op, kStages, Out>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  moe_mma::MoeGroupedMmaKernel<op, kStages, Out>
      <<<grid, moe_mma::kThreads, bytes, stream>>>(dst, a, s.sorted, s.tiles, weights, w, n_blocks, K, H, I);
  KERNEL_CHECK();
}

// The tensor-core kernel (moe_gemm_mma.cuh) on bf16 activation rows `a`: 4 stages where a block
// may take their 100 KB of shared memory (the H200: two blocks an SM), else 3 (the GB10).
template <moe_mma::Op op, typename Out>
void LaunchMma(cudaStream_t stream, Out* dst, const bf16_bits* a, const MoeSorted& s, const float* weights,
               const bf16_bits* w, int64_t K, int64_t H, int64_t I) {
  const int64_t outputs = op == moe_mma::Op::kGateUp ? I : H, per_block = moe_mma::BlockOutputs(op);
  const int n_blocks = static_cast<int>((outputs + per_block - 1) / per_block);
  const int64_t blocks = s.tile_bound * n_blocks;
  KERNEL_REQUIRE(blocks <= INT32_MAX);
  const dim3 grid(static_cast<unsigned>(blocks));
  const auto* au = reinterpret_cast<const uint16_t*>(a);
  const auto* wu = reinterpret_cast<const uint16_t*>(w);
  if (MaxSmemPerBlock() >= moe_mma::SmemBytes(4)) {
    LaunchMmaStages<op, 4>(grid, stream, dst, au, s, weights, wu, n_blocks, K, H, I);
  } else {
    LaunchMmaStages<op, 3>(grid, stream, dst, au, s, weights, wu, n_blocks, K, H, I);
  }
}

// n floats rounded to bf16 into scratch slot 3.
const bf16_bits* ToBf16Scratch(const float* src, int64_t n, int64_t T, int64_t K, int64_t H, int64_t I,
                               cudaStream_t stream) {
  auto* dst = static_cast<bf16_bits*>(StreamScratch(stream, 3, RoundedBytes(T, K, H, I)));
  floats_to_bf16(dst, src, n, stream);
  return dst;
}

}  // namespace

cudaError_t ReserveMoeGrouped(cudaStream_t stream, int64_t T, int64_t K, int64_t H, int64_t I) {
  if (!SizesSupported(H, I) || T * K == 0 || T * K > INT32_MAX / 2) return cudaSuccess;  // no grouped launch
  if (const cudaError_t err = ReserveStreamScratch(stream, 1, SortBytes(T * K)); err != cudaSuccess) return err;
  if (const cudaError_t err = ReserveStreamScratch(stream, 3, RoundedBytes(T, K, H, I)); err != cudaSuccess) {
    return err;
  }
  if (const cudaError_t err = ReserveStreamScratch(stream, 4, FusedActBytes(T, K, I)); err != cudaSuccess) return err;
  return ReserveStreamScratch(stream, 2, PartialBytes(T, K, H));
}

bool moe_gate_up_grouped(float* act, const float* x, const int32_t* ids, const bf16_bits* gate_up, int64_t T,
                         int64_t K, int64_t H, int64_t I, cudaStream_t stream, const bf16_bits* gate_up_lo) {
  if (!MoeGroupedSupported(x, gate_up, H, I) || !Aligned16(act) || !Aligned16(gate_up_lo) || T * K > INT32_MAX / 2) {
    return false;
  }
  if (T * K == 0) return true;
  const MoeSorted s = SortPairs(ids, T * K, stream);
  if (gate_up_lo == nullptr) {
    LaunchMma<moe_mma::Op::kGateUp>(stream, act, ToBf16Scratch(x, T * H, T, K, H, I, stream), s, nullptr, gate_up, K,
                                    H, I);
  } else {
    LaunchSplit<MoeOp::kGateUp>(stream, act, x, s, nullptr, gate_up, gate_up_lo, K, H, I);
  }
  return true;
}

bool moe_down_grouped(float* out, const float* act, const int32_t* ids, const float* weights,
                      const bf16_bits* down, int64_t T, int64_t K, int64_t H, int64_t I, cudaStream_t stream,
                      const bf16_bits* down_lo) {
  // T is the reduction's grid.y.
  if (!MoeGroupedSupported(act, down, H, I) || !Aligned16(out) || !Aligned16(down_lo) || T * K > INT32_MAX / 2 ||
      T > 65535) {
    return false;
  }
  if (T * K == 0) return true;
  const MoeSorted s = SortPairs(ids, T * K, stream);
  auto* part = static_cast<float*>(StreamScratch(stream, 2, PartialBytes(T, K, H)));
  if (down_lo == nullptr) {
    LaunchMma<moe_mma::Op::kDown>(stream, part, ToBf16Scratch(act, T * K * I, T, K, H, I, stream), s, weights, down,
                                  K, H, I);
  } else {
    LaunchSplit<MoeOp::kDown>(stream, part, act, s, weights, down, down_lo, K, H, I);
  }
  MoeReducePairs(out, part, T, K, H, stream);
  return true;
}

bool moe_grouped(float* out, const float* x, const int32_t* ids, const float* weights, const bf16_bits* gate_up,
                 const bf16_bits* down, int64_t T, int64_t K, int64_t H, int64_t I, cudaStream_t stream) {
  if (!MoeGroupedSupported(x, gate_up, H, I) || !Aligned16(down) || !Aligned16(out) || T * K > INT32_MAX / 2 ||
      T > 65535) {
    return false;
  }
  if (T * K == 0) return true;
  const MoeSorted s = SortPairs(ids, T * K, stream);
  auto* act = static_cast<uint16_t*>(StreamScratch(stream, 4, FusedActBytes(T, K, I)));
  LaunchMma<moe_mma::Op::kGateUp>(stream, act, ToBf16Scratch(x, T * H, T, K, H, I, stream), s, nullptr, gate_up, K, H,
                                  I);
  auto* part = static_cast<float*>(StreamScratch(stream, 2, PartialBytes(T, K, H)));
  LaunchMma<moe_mma::Op::kDown>(stream, part, reinterpret_cast<const bf16_bits*>(act), s, weights, down, K, H, I);
  MoeReducePairs(out, part, T, K, H, stream);
  return true;
}

}  // namespace tandem::kernels
