// The inner loops of every bf16 product at decode sizes (dense matmul, MoE experts). Decode at small
// batch is bound by how many weight bytes are in flight: each lane holds a whole chunk of a row in
// registers (NL 16-byte loads = 8*NL weights) before it uses the first, so a warp has NL * 512 bytes
// of one row outstanding, and a launch keeps megabytes in flight instead of a few loads per warp.
// Lane l of chunk c owns weights [c*256*NL + k*256 + l*8, +8) for k < NL: every load instruction of a
// warp reads 512 contiguous bytes. Accumulation is float32.
#pragma once

#include <cstdint>

#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

// Issues the NL loads of chunk `base` (element offset, a multiple of 256*NL) of `row` (length `in`,
// a multiple of 8); loads past the end are skipped (their registers stay unused).
template <int NL>
__device__ __forceinline__ void LoadChunk(uint4 buf[NL], const uint16_t* row, int64_t base, int64_t in, int lane) {
#pragma unroll
  for (int k = 0; k < NL; ++k) {
    const int64_t i = base + k * 256 + lane * 8;
    if (i < in) buf[k] = __ldcs(reinterpret_cast<const uint4*>(row + i));
  }
}

// LoadChunk's loads issued in P groups, each only once the group before it has landed: group g + 1's
// addresses depend on group g's data through `zero` (0 at run time, passed by the launcher, so the
// compiler cannot drop the dependency), which makes the warp wait for group g before it issues
// group g + 1. A warp then has NL / P loads in flight instead of NL. For a product that loads its
// whole row before its wait while latency-bound kernels run (the batch-1 o_proj beside attention),
// all NL at once queue 16 MB on the SMs ahead of those kernels' own reads; see MatmulKernel.
template <int NL, int P>
__device__ __forceinline__ void LoadChunkPaced(uint4 buf[NL], const uint16_t* row, int64_t in, int lane,
                                               uint32_t zero) {
  static_assert(P >= 1 && NL % P == 0, "whole groups");
  constexpr int kPer = NL / P;
  uint32_t dep = 0;
#pragma unroll
  for (int g = 0; g < P; ++g) {
    LoadChunk<kPer>(buf + g * kPer, row + (dep & zero), g * kPer * 256, in, lane);
    if (g + 1 < P) {  // after the group's loads are all issued, so that they go out together
#pragma unroll
      for (int k = g * kPer; k < (g + 1) * kPer; ++k) {
        if (k * 256 + lane * 8 < in) dep ^= buf[k].x;
      }
    }
  }
}

// acc[t] += dot(chunk in buf, x + t*in) for t < nt (x float32, 16-byte aligned rows). Global x
// goes through the read-only cache (kGlobalX); x staged in shared memory takes plain loads.
template <int NL, int TT, bool kGlobalX = true>
__device__ __forceinline__ void UseChunk(float acc[TT], const uint4 buf[NL], const float* x, int64_t base, int64_t in,
                                         int nt, int lane) {
#pragma unroll
  for (int k = 0; k < NL; ++k) {
    const int64_t i = base + k * 256 + lane * 8;
    if (i < in) {
      float w[8];
      Widen8(buf[k], w);
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        if (t < nt) {
          const float4* xp = reinterpret_cast<const float4*>(x + t * in + i);
          float4 a, b;
          if constexpr (kGlobalX) {
            a = __ldg(xp), b = __ldg(xp + 1);
          } else {
            a = xp[0], b = xp[1];
          }
          acc[t] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z +
                    w[7] * b.w;
        }
      }
    }
  }
}

// acc[r][t] (on every lane) = dot(rows[r], x + t * in) for t < nt, r < R, the rows' first chunk
// already in buf (loaded before the kernel waited on its predecessor), the later chunks loaded
// here. x is global (kGlobalX) or staged in shared memory.
template <int R, int NL, int TT, bool kGlobalX>
__device__ __forceinline__ void RowsDotLoaded(float (&acc)[R][TT], uint4 (&buf)[R][NL],
                                              const uint16_t* const (&rows)[R], const float* x, int64_t in, int nt,
                                              int lane) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = 0.0f;
  }
  for (int64_t base = 0;;) {
#pragma unroll
    for (int r = 0; r < R; ++r) UseChunk<NL, TT, kGlobalX>(acc[r], buf[r], x, base, in, nt, lane);
    base += 256 * NL;
    if (base >= in) break;
#pragma unroll
    for (int r = 0; r < R; ++r) LoadChunk<NL>(buf[r], rows[r], base, in, lane);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = WarpSum(acc[r][t]);
  }
}

// acc[r] (on every lane) = dot(rows[r], xs[r]) over `in` elements, NR rows' chunks in flight
// together, each chunk loaded in the iteration that uses it (moe_gate_up, which can load nothing
// before its wait; the form measured there).
template <int NR, int NL>
__device__ __forceinline__ void RowsDot(float acc[NR], const uint16_t* const rows[NR], const float* const xs[NR],
                                        int64_t in, int lane) {
#pragma unroll
  for (int r = 0; r < NR; ++r) acc[r] = 0.0f;
  for (int64_t base = 0; base < in; base += 256 * NL) {
    uint4 buf[NR][NL];
#pragma unroll
    for (int r = 0; r < NR; ++r) LoadChunk<NL>(buf[r], rows[r], base, in, lane);
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      float a[1] = {acc[r]};
      UseChunk<NL, 1>(a, buf[r], xs[r], base, in, 1, lane);
      acc[r] = a[0];
    }
  }
#pragma unroll
  for (int r = 0; r < NR; ++r) acc[r] = WarpSum(acc[r]);
}

// y[(t0 + t) * out + o0 + r] = dot(rows[r], x + t * in) for t < nt, r < R (rows past `out`
// dropped): the tail every dense product kernel shares (RowsDotLoaded, then the store).
template <int R, int NL, int TT, bool kGlobalX>
__device__ __forceinline__ void RowsProduct(float* y, const float* x, uint4 (&buf)[R][NL],
                                            const uint16_t* const (&rows)[R], int64_t in, int64_t out, int64_t o0,
                                            int64_t t0, int nt, int lane) {
  float acc[R][TT];
  RowsDotLoaded<R, NL, TT, kGlobalX>(acc, buf, rows, x, in, nt, lane);
  StoreRowsTile<R, TT>(y, acc, out, o0, t0, nt, lane);
}

// The block shape of a dense product (8 warps; R rows per warp, NL loads per lane per row chunk):
// about 16 loads per lane in flight, short rows several to a warp at batch 1 (bench/matvec_sweep.cu:
// 4 rows x 4 loads ran a 5120 x 2048 product in 6.8 us where 1 row x 8 loads took 8.2 us), long rows
// one at a time. Encoded as R * 100 + NL for the launchers' switch.
inline int MatvecShape(int64_t in, int tt, int64_t out) {
  const int64_t need = (in + 255) / 256;  // loads per lane for a whole row
  // A short product (the router: 128 rows) one row per warp, over as many SMs as it can reach: while
  // its rows fill at most 4 blocks of 8 warps on every SM of this device (4224 rows on the H200).
  if (tt == 1 && out <= 8 * 4 * static_cast<int64_t>(SmCount()) && need <= 8) {
    return 100 + static_cast<int>(need <= 4 ? (need < 1 ? 1 : need) : 8);
  }
  if (tt == 1 && need <= 4) return 400 + static_cast<int>(need < 1 ? 1 : need);
  // Rows of 1-2K at batch 1: in the decode graph the q/k/v product (5120 x 2048) ran its step at
  // 3.033 ms with one row x 4 loads vs 3.099 with 4 rows x 4 (H200, 2026-12-02), unlike in the
  // isolated sweep; the lm_head (151936 rows) keeps 4 x 4.
  if (tt == 1 && need <= 8 && out <= 16384) return 104;
  if (tt == 1 && need <= 8) return 404;
  if (tt == 1 && need <= 16) return 116;
  if (need <= 4) return 100 + static_cast<int>(need < 1 ? 1 : need);
  return 108;
}

// Calls F<R, NL>() for the shape code of MatvecShape at token tile TT. Only the shapes MatvecShape
// gives TT are instantiated (several rows per warp only at TT = 1), and only one-row shapes where
// the caller knows its products are short (kOneRow): each instantiation costs build time.
template <int TT, bool kOneRow = false, typename F>
void DispatchMatvecShape(int code, F&& f) {
  if constexpr (TT == 1 && !kOneRow) {
    switch (code) {
      case 401: f.template operator()<4, 1>(); return;
      case 402: f.template operator()<4, 2>(); return;
      case 403: f.template operator()<4, 3>(); return;
      case 404: f.template operator()<4, 4>(); return;
      default: break;
    }
  }
  if constexpr (TT == 1) {
    if (code == 116) {
      f.template operator()<1, 16>();
      return;
    }
  }
  switch (code) {
    case 101: f.template operator()<1, 1>(); break;
    case 102: f.template operator()<1, 2>(); break;
    case 103: f.template operator()<1, 3>(); break;
    case 104: f.template operator()<1, 4>(); break;
    default: f.template operator()<1, 8>(); break;
  }
}

}  // namespace tandem::kernels
