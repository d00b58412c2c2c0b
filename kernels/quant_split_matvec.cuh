// The batch-1 product of a quantized dense matrix (one token: y = W x) with each row's columns split
// across the warps of a block. The per-format kernels (quant_fp8.cu, quant_nvfp4.cu) give a warp whole
// rows: a 4096-wide row is then one warp's serial work (decode, scale, multiply-add of every weight)
// after its loads return, and a 2048-row o_proj is only 2048 warps. Here a block owns R rows and its
// WARPS warps own interleaved slices of their columns, so a row's loads and arithmetic are spread
// over WARPS * 32 lanes, every x value a lane reads serves the R rows, and the warps' partial sums
// meet in shared memory, added in a fixed order (the result does not depend on timing).
//
// A format is a policy P (defined beside its other kernels):
//   P::Matrix            what the kernel needs of W (pointers, geometry), passed by value;
//   P::Row / P::Raw      one row's pointers and scale; one load's codes and scales;
//   P::loads_per_row(m)  loads that cover a row (an int);
//   P::RowOf(m, r), P::Fetch(raw, m, row, j): row r; load j of a row (weights and their scales only:
//                        they never change during a step, so they may be read before GridDepWait);
//   P::template Dot<R>(acc, raw[R], m, rows[R], x, j): acc[r] += the scaled product of load j of
//                        row r with the matching x values, for r < R (x read once for the R rows);
//   P::cols(m), P::Expert(stack, e): columns of a row; matrix e of a stack of experts (only the
//                        experts' kernels need these two).
#pragma once

#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/l2_prefetch.h"
#include "kernels/launch.cuh"
#include "kernels/split_order.h"

namespace tandem::kernels::detail {

// Load j of a row belongs to warp (j / 32) % WARPS, lane j % 32 of the block; a lane keeps NL loads
// of each of the block's R rows in flight, and longer rows take more rounds of NL.
// SplitLoadRound issues the round starting at load `base`; SplitRowsDot (round 0 already issued)
// leaves dot(row r, x) for r < R on thread r of the block (other threads: unspecified), summing the
// warps' parts in shared memory in a fixed order. Every thread of the block must call it; with
// kOneRound the caller guarantees that round 0 covers the row (no later round is compiled).
template <class P, int R, int WARPS, int NL>
__device__ __forceinline__ void SplitLoadRound(typename P::Raw (&buf)[NL][R], const typename P::Matrix& m,
                                               const typename P::Row (&rows)[R], int base, int nj) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int k = 0; k < NL; ++k) {
    const int j = base + (k * WARPS + warp) * 32 + lane;
    if (j < nj) {
#pragma unroll
      for (int r = 0; r < R; ++r) P::Fetch(buf[k][r], m, rows[r], j);
    }
  }
}

template <class P, int R, int WARPS, int NL, bool kOneRound = false>
__device__ __forceinline__ float SplitRowsDot(typename P::Raw (&buf)[NL][R], const typename P::Matrix& m,
                                              const typename P::Row (&rows)[R], const float* x, int nj) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float acc[R] = {};
  for (int base = 0;;) {
#pragma unroll
    for (int k = 0; k < NL; ++k) {
      const int j = base + (k * WARPS + warp) * 32 + lane;
      if (j < nj) P::template Dot<R>(acc, buf[k], m, rows, x, j);
    }
    if constexpr (kOneRound) break;
    base += NL * WARPS * 32;
    if (base >= nj) break;
    SplitLoadRound<P, R, WARPS, NL>(buf, m, rows, base, nj);
  }
  __shared__ float partial[WARPS][R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = WarpSum(acc[r]);
    if (lane == 0) partial[warp][r] = s;
  }
  __syncthreads();
  float s = 0.0f;
  if (threadIdx.x < R) {
#pragma unroll
    for (int w = 0; w < WARPS; ++w) s += partial[w][threadIdx.x];
  }
  return s;
}

// The dense product. Grid (ceil(out / R)), WARPS * 32 threads: block b computes rows b*R .. b*R+R-1
// (rows past `out` recompute the last row and are not stored), every load issued before the wait
// on the previous kernel.
template <class P, int R, int WARPS, int NL>
__global__ void __launch_bounds__(WARPS * 32)
    SplitMatvecKernel(float* y, const float* x, typename P::Matrix m, int64_t out) {
  GridDepLaunchDependents();
  const int64_t o0 = static_cast<int64_t>(blockIdx.x) * R;
  const int nj = P::loads_per_row(m);
  typename P::Row rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = P::RowOf(m, o0 + r < out ? o0 + r : out - 1);
  typename P::Raw buf[NL][R];
  SplitLoadRound<P, R, WARPS, NL>(buf, m, rows, 0, nj);
  GridDepWait();
  const float s = SplitRowsDot<P, R, WARPS, NL>(buf, m, rows, x, nj);
  if (threadIdx.x < R && o0 + threadIdx.x < out) y[o0 + threadIdx.x] = s;
}

// The experts' gate and up products with SiLU(gate) * up (moe_gate_up's decode form). Grid
// (ceil(I / RP), pairs of this launch), WARPS * 32 threads: block (b, q) computes rows i = b*RP ..
// b*RP+RP-1 of gate (rows i) and up (rows I + i) of expert ids[p], p = p0 + q, over the x of token
// p / K: 2 * RP rows sharing every x value. The expert comes from the router, so nothing is loaded
// before the wait; the next kernel may launch only after it (moe_down reads the ids early).
// P::Expert(stack, e) is matrix e of a stack. kOneRound: one load a lane covers the row (the caller
// checks); the kernel then holds 8 rows' loads and little else, and is capped at 24 warps an SM (80
// registers, no spill on sm_90, a 4-byte spill on sm_121 with CUDA 13.0) where it took 168 registers
// (12 warps): Qwen3-30B-A3B's 1536 blocks of a one-token step fit in one wave on 132 SMs, and a batch
// of 8 tokens (12,288 blocks) runs its waves with twice the warps (docs/bench/quant-decode-h200.md,
// session 35).
// kActSplit: each pair's act row is stored in split order (kernels/split_order.h): the block's RP = 4
// values are one float4 of the row, placed where the split order puts it (I % 32 == 0, checked by the
// caller), for a down product that reads its x that way.
template <class P, int RP, int WARPS, int NL, bool kOneRound, bool kActSplit = false>
__global__ void __launch_bounds__(WARPS * 32, kOneRound && NL == 1 ? 24 / WARPS : 0)
    SplitMoeGateUpKernel(float* act, const float* x, const int32_t* ids, typename P::Matrix stack, int64_t I,
                         int64_t K, int64_t p0, L2Prefetch next) {
  static_assert(!kActSplit || RP == kSplitOrderFloats, "a block's act values are one float4 of the split order");
  PrefetchL2(next);
  GridDepWait();
  GridDepLaunchDependents();
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * RP;
  const int64_t p = p0 + blockIdx.y;
  const typename P::Matrix m = P::Expert(stack, ids[p]);
  const int nj = P::loads_per_row(m);
  typename P::Row rows[2 * RP];
#pragma unroll
  for (int r = 0; r < RP; ++r) {
    const int64_t i = i0 + r < I ? i0 + r : I - 1;
    rows[r] = P::RowOf(m, i);
    rows[RP + r] = P::RowOf(m, I + i);
  }
  typename P::Raw buf[NL][2 * RP];
  SplitLoadRound<P, 2 * RP, WARPS, NL>(buf, m, rows, 0, nj);
  const float s = SplitRowsDot<P, 2 * RP, WARPS, NL, kOneRound>(buf, m, rows, x + (p / K) * P::cols(m), nj);
  // Thread r < RP holds gate row r, thread RP + r up row r: one shuffle brings them together.
  const float up = __shfl_down_sync(0xffffffffu, s, RP);
  if (threadIdx.x < RP && i0 + threadIdx.x < I) {
    const int64_t col = kActSplit ? SplitOrderQuad(i0 / RP, I) * RP + threadIdx.x : i0 + threadIdx.x;
    act[p * I + col] = SiluF(s) * up;
  }
}

// The experts' down product of the decode step, weighted and summed over each token's K slots
// (moe_down's decode form). Rows of the experts' intermediate size are short (768 columns: 48 FP8
// loads, 24 NVFP4 loads), so a whole warp per row leaves lanes idle or takes two rounds; here a
// group of L lanes (8, 16 or 32) owns one slot and the block's R rows, each lane NL loads of each
// row, all issued at once and all sharing the lane's activation values. Grid (ceil(H / R), T), 8
// groups (slots k = group, group + 8, ...); the groups' weighted sums meet in shared memory in a fixed
// order. With `early` (this launch directly follows moe_gate_up's decode kernel, so the router's
// ids are complete when it starts) a group loads its first slot before waiting for the activations.
// P reads act's rows as it reads x (NVFP4's split-order policy: act in split order).
template <class P, int R, int L, int NL>
__global__ void __launch_bounds__(8 * L)
    SplitMoeDownKernel(float* out, const float* act, const int32_t* ids, const float* weights,
                       typename P::Matrix stack, int64_t H, int64_t K, bool early) {
  constexpr int kGroups = 8;
  const int lane = threadIdx.x % L, group = threadIdx.x / L;
  // The lanes of this group within its warp (a group never spans two warps: L divides 32).
  const unsigned mask = L == 32 ? 0xffffffffu : ((1u << L) - 1u) << (threadIdx.x % 32 / L * L);
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * R, t = blockIdx.y;
  typename P::Matrix m = stack;
  typename P::Row rows[R];
  typename P::Raw buf[NL][R];
  const auto load_slot = [&](int64_t k) {
    m = P::Expert(stack, __ldcg(ids + t * K + k));
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = P::RowOf(m, h0 + r < H ? h0 + r : H - 1);
    const int nj = P::loads_per_row(m);
#pragma unroll
    for (int n = 0; n < NL; ++n) {
      const int j = n * L + lane;
      if (j < nj) {
#pragma unroll
        for (int r = 0; r < R; ++r) P::Fetch(buf[n][r], m, rows[r], j);
      }
    }
  };
  if (early && group < K) load_slot(group);
  GridDepWait();
  // The next kernel launches after this wait, as in moe_down (kernels/moe.cu).
  GridDepLaunchDependents();
  float sum[R] = {};
  for (int64_t k = group; k < K; k += kGroups) {
    if (k != group || !early) load_slot(k);
    const int nj = P::loads_per_row(m);
    const float* x = act + (t * K + k) * P::cols(m);
    float acc[R] = {};
#pragma unroll
    for (int n = 0; n < NL; ++n) {
      const int j = n * L + lane;
      if (j < nj) P::template Dot<R>(acc, buf[n], m, rows, x, j);
    }
    const float wk = weights[t * K + k];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int off = L / 2; off > 0; off /= 2) acc[r] += __shfl_xor_sync(mask, acc[r], off);
      sum[r] += wk * acc[r];
    }
  }
  __shared__ float partial[kGroups][R];
  StoreSlotSums<kGroups, R>(out + t * H, partial, sum, h0, H, group, lane);
}

// Calls go.operator()<WARPS, NL>() for rows of `loads` loads: WARPS the largest of 8, 4, 2, 1 with
// WARPS * 32 <= loads (at least 1); NL = 2 when one load per lane and round covers under half a row.
template <class F>
void SplitShape(int64_t loads, F&& go) {
  const int warps = loads >= 256 ? 8 : loads >= 128 ? 4 : loads >= 64 ? 2 : 1;
  const bool two = loads > 2 * 32 * warps;
  switch (warps) {
    case 8: two ? go.template operator()<8, 2>() : go.template operator()<8, 1>(); break;
    case 4: two ? go.template operator()<4, 2>() : go.template operator()<4, 1>(); break;
    case 2: two ? go.template operator()<2, 2>() : go.template operator()<2, 1>(); break;
    default: two ? go.template operator()<1, 2>() : go.template operator()<1, 1>(); break;
  }
}

// Launches the split product for a matrix whose rows take `loads` loads each: 8 rows a block, the
// warps and loads of SplitShape (longer rows loop over rounds). 8 rows a block won the
// A/B on the H200 (Qwen3-30B-A3B's q/k/v and o_proj in FP8, decode step at batch 1: 2.504 ms with 8,
// 2.614 with 4, 2.699 with 2, 2.906 with one row a warp; NVFP4: 3.101 with 8, 3.104 with 4, 3.748).
template <class P>
void LaunchSplitMatvec(float* y, const float* x, const typename P::Matrix& m, int64_t loads, int64_t out,
                       cudaStream_t stream) {
  constexpr int kRows = 8;
  const dim3 grid(static_cast<unsigned>((out + kRows - 1) / kRows));
  const auto go = [&]<int W, int NL>() {
    Launch(SplitMatvecKernel<P, kRows, W, NL>, grid, dim3(W * 32), 0, stream, y, x, m, out);
  };
  SplitShape(loads, go);
}

// Launches the split gate/up product over pairs p0 .. p0 + pairs - 1 (pairs <= 65535) of a stack
// whose rows take `loads` loads each, 4 row pairs a block, the warps of SplitShape. Used for NVFP4 (it
// won there); FP8's one-pair-a-warp kernel beat it (batch 1: 2.520 ms against 2.609 a step). At one
// token, lighter warps lost to this shape (H100, NVFP4 batch 1 at 1k): 2 row pairs a block at 48 warps
// an SM +7.0%, 8-byte loads with 4 warps a block +3.2%, a lane's rows summed one after another +2.8%
// (docs/bench/quant-decode-h200.md, session 49); and so did 6 of the 8 rows brought in by bulk copies
// (cp.async.bulk), each on its own mbarrier, their products taken in the order they landed: +3.9% to
// +5.1% at 1k, +2.6% to +3.9% at 4k with the scale bytes as plain loads (session 53), +3.4% / +2.2%
// with them in the copies (session 54). So did this kernel asking the L2 for its experts' down
// weights once it knows them (+2.7% to +4.2%, session 54; moe_down was no faster with them there).
// The kernel is sensitive to anything on its warps' path after the data arrives: one more argument
// and a 4-byte spill cost the step 2.2-2.8%; a prefetch.global.L1 of the lane's x line right after
// the wait cost 12.7%; its x reads, 32 lines a warp in row order, cost about 2% until they came in
// split order (kernels/split_order.h; session 54).
// kActSplit: act rows in split order (I % 32 == 0).
template <class P, bool kActSplit = false>
void LaunchSplitMoeGateUp(float* act, const float* x, const int32_t* ids, const typename P::Matrix& stack,
                          int64_t loads, int64_t I, int64_t K, int64_t p0, int64_t pairs, cudaStream_t stream,
                          L2Prefetch next = {}) {
  constexpr int kPairs = 4;
  KERNEL_REQUIRE(pairs <= 65535);
  KERNEL_REQUIRE(!kActSplit || I % 32 == 0);
  const dim3 grid(static_cast<unsigned>((I + kPairs - 1) / kPairs), static_cast<unsigned>(pairs));
  const auto go = [&]<int W, int NL>() {
    if (loads <= NL * W * 32) {
      Launch(SplitMoeGateUpKernel<P, kPairs, W, NL, true, kActSplit>, grid, dim3(W * 32), 0, stream, act, x, ids,
             stack, I, K, p0, next);
    } else {
      Launch(SplitMoeGateUpKernel<P, kPairs, W, NL, false, kActSplit>, grid, dim3(W * 32), 0, stream, act, x, ids,
             stack, I, K, p0, next);
    }
  };
  SplitShape(loads, go);
}

constexpr int64_t kSplitDownMaxLoads = 4 * 32;  // the longest rows LaunchSplitMoeDown takes, in loads

// Launches the split down product for T tokens (T <= 65535) of a stack whose rows take `loads` loads
// each, 4 rows a block: L the smallest of 8, 16, 32 that covers a row in at most 4 loads a lane.
// Returns false (nothing launched) for rows longer than kSplitDownMaxLoads loads.
template <class P>
bool LaunchSplitMoeDown(float* out, const float* act, const int32_t* ids, const float* weights,
                        const typename P::Matrix& stack, int64_t loads, int64_t H, int64_t T, int64_t K, bool early,
                        cudaStream_t stream) {
  constexpr int kRows = 4;
  if (loads > kSplitDownMaxLoads || T > 65535) return false;
  const dim3 grid(static_cast<unsigned>((H + kRows - 1) / kRows), static_cast<unsigned>(T));
  const auto go = [&]<int L, int NL>() {
    Launch(SplitMoeDownKernel<P, kRows, L, NL>, grid, dim3(8 * L), 0, stream, out, act, ids, weights, stack, H, K,
           early);
  };
  const int lanes = loads <= 4 * 8 ? 8 : loads <= 4 * 16 ? 16 : 32;
  const int64_t nl = (loads + lanes - 1) / lanes;
  const auto by_loads = [&]<int L>() {
    switch (nl) {
      case 1: go.template operator()<L, 1>(); break;
      case 2: go.template operator()<L, 2>(); break;
      case 3: go.template operator()<L, 3>(); break;
      default: go.template operator()<L, 4>(); break;
    }
  };
  if (lanes == 8) by_loads.template operator()<8>();
  else if (lanes == 16) by_loads.template operator()<16>();
  else by_loads.template operator()<32>();
  return true;
}

}  // namespace tandem::kernels::detail
