// The tensor-core pieces shared by the tiled attention kernels: attention_prefill.cu (a tile of a
// prompt's tokens per block) and attention_decode.cu (one-token sequences, a sequence's positions
// split across blocks). bf16 mma.sync m16n8k16 with fp32 accumulation and ldmatrix fragment loads
// (mma_sync.cuh), base-2 exponentials, and the stager that moves K/V tiles of one kv head from the
// paged cache into shared memory as bf16 through the block table (cp.async copies: cp_async.cuh).
// Plain sm_80 instructions: the same code runs on the H200 (sm_90) and the DGX Spark's GB10 (sm_121).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>

#include "kernels/cp_async.cuh"
#include "kernels/mma_sync.cuh"

namespace tandem::kernels::tile {

using kernels::CpAsync16;
using kernels::CpAsyncCommit;
using kernels::CpAsyncWait;
using kernels::LdMatrixX4;
using kernels::LdMatrixX4Trans;
using kernels::Mma;
using kernels::PackFloatsBf16;
using kernels::SmemAddr;

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float Exp2(float x) {  // 2^x, 0 for -inf
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Eight consecutive cache elements as eight bf16 (one 16-byte shared store). e4m3 -> f16 -> f32 ->
// bf16 is exact (3 mantissa bits, |x| <= 448); float32 rounds to nearest even.
__device__ __forceinline__ uint4 ToBf16x8(const float4& a, const float4& b) {
  return make_uint4(PackFloatsBf16(a.x, a.y), PackFloatsBf16(a.z, a.w), PackFloatsBf16(b.x, b.y),
                    PackFloatsBf16(b.z, b.w));
}
__device__ __forceinline__ uint32_t Fp8x2ToBf16x2(uint32_t two) {
  const __half2 h(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3));
  const float2 f = __half22float2(h);
  return PackFloatsBf16(f.x, f.y);
}
__device__ __forceinline__ uint4 ToBf16x8(const uint2& raw) {
  return make_uint4(Fp8x2ToBf16x2(raw.x & 0xffffu), Fp8x2ToBf16x2(raw.x >> 16), Fp8x2ToBf16x2(raw.y & 0xffffu),
                    Fp8x2ToBf16x2(raw.y >> 16));
}

// The online softmax of one tile for a warp's 16 rows: sc[NB][4] holds the warp's scores (base 2)
// in the m16n8 accumulator layout (rows g = lane / 4 and g + 8, NB column blocks of 8; a row's
// columns lie on the 4 lanes of a quad). The scores become exp2(score - running max), l_run adds this
// lane's part of each row's sum (the quad sums at the end), and o (the row's running output, the same
// layout over HD / 8 blocks) is rescaled to the new maximum. A row whose scores so far are all -inf
// (all masked) keeps the maximum -inf and, with kAllMaskedRows, takes base 0, so its weights are 0,
// not NaN; a caller whose rows always have an unmasked score leaves it out (one register less, which
// the prefill kernel at head_dim 256 does not have to spare on sm_121).
template <bool kAllMaskedRows, int NB, int OB>
__device__ __forceinline__ void OnlineSoftmaxTile(float (&sc)[NB][4], float (&m_run)[2], float (&l_run)[2],
                                                  float (&o)[OB][4]) {
  float corr[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float mx = m_run[half];
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) mx = fmaxf(mx, fmaxf(sc[nb][2 * half], sc[nb][2 * half + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float base = kAllMaskedRows && mx == -INFINITY ? 0.0f : mx;
    corr[half] = Exp2(m_run[half] - base);
    m_run[half] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
#pragma unroll
      for (int e = 2 * half; e < 2 * half + 2; ++e) {
        sc[nb][e] = Exp2(sc[nb][e] - base);
        sum += sc[nb][e];
      }
    }
    l_run[half] = l_run[half] * corr[half] + sum;
  }
#pragma unroll
  for (int nb = 0; nb < OB; ++nb) {
    o[nb][0] *= corr[0], o[nb][1] *= corr[0];
    o[nb][2] *= corr[1], o[nb][3] *= corr[1];
  }
}

// Moves tiles of kBN consecutive positions of one kv head's K and V (HD values each) from a paged
// cache into shared memory as bf16, rows kLd = HD + 8 elements apart (16 bytes past the row, so the
// 8 rows one ldmatrix reads start in 8 different 16-byte bank groups, each 16-byte aligned for
// cp.async). Two buffers: buffer b holds K at smem + 2b * kTileElems and V right after it. Rows
// past the sequence's last position become zeros.
//
// The cache slots of a tile's positions are looked up through the block table by the first kBN
// threads into `slots[buf]` (-1 past the last position) a tile ahead of the copy, so the lookup's
// latency hides behind a tile of products and no thread holds a register per row for it. Thread tid
// moves chunk column cc = tid % (HD / 8) of rows row0 + i * kRowStep. A bf16 cache is copied with
// cp.async; fp8 is loaded into registers (`held`) and converted when put (kHold); float32 (and fp8 at
// head_dim 256, whose 32 held registers are not there) is converted as it is fetched (kFetchLate: its
// loads are issued after the tile's products, where the compiler does not keep them live across them).
template <int HD, typename KV, int kThreads, int kBN>
struct KvTileStager {
  static constexpr int kLd = HD + 8;
  static constexpr int kTileElems = kBN * kLd;
  static constexpr int kCols = HD / 8;               // 8-element chunks per K/V row
  static constexpr int kRowStep = kThreads / kCols;  // rows between one thread's chunks
  static constexpr int kPer = kBN / kRowStep;        // chunks per thread per tile, of K and of V each
  static constexpr bool kAsync = sizeof(KV) == 2;
  static constexpr bool kHold = sizeof(KV) == 1 && HD <= 128;
  static constexpr bool kFetchLate = !kAsync && !kHold;
  static_assert(kThreads % kCols == 0 && kBN % kRowStep == 0, "whole rows per thread group");
  static_assert(kBN <= 64 && kBN <= kThreads, "slots hold a tile's slots, one thread each");

  __nv_bfloat16* smem;
  int32_t (*slots)[64];  // [2][64] in shared memory
  const int32_t* table;  // the sequence's block table row
  const KV* kc;
  const KV* vc;
  uint32_t block_size;
  int n_pos;  // positions 0 .. n_pos - 1 exist
  int64_t kv_dim;
  int head_off;  // kvh * HD
  int tid, cc, row0;
  uint2 held[2][kPer];  // fp8 only

  __device__ __forceinline__ KvTileStager(__nv_bfloat16* smem_, int32_t (*slots_)[64], const int32_t* table_,
                                          const KV* kc_, const KV* vc_, int64_t block_size_, int n_pos_,
                                          int64_t kv_dim_, int kvh)
      : smem(smem_),
        slots(slots_),
        table(table_),
        kc(kc_),
        vc(vc_),
        block_size(static_cast<uint32_t>(block_size_)),
        n_pos(n_pos_),
        kv_dim(kv_dim_),
        head_off(kvh * HD),
        tid(static_cast<int>(threadIdx.x)),
        cc(static_cast<int>(threadIdx.x) % kCols),
        row0(static_cast<int>(threadIdx.x) / kCols) {}

  __device__ __forceinline__ const __nv_bfloat16* k_tile(int buf) const { return smem + 2 * buf * kTileElems; }
  __device__ __forceinline__ const __nv_bfloat16* v_tile(int buf) const { return k_tile(buf) + kTileElems; }

  // The cache slot of position p (-1 past the last position): a global load of the block table.
  __device__ __forceinline__ int32_t slot_of(int position) const {
    const uint32_t p = static_cast<uint32_t>(position);
    const int32_t within = static_cast<int32_t>(p % block_size);
    return p < static_cast<uint32_t>(n_pos) ? table[p / block_size] * static_cast<int32_t>(block_size) + within : -1;
  }

  // Looks up the slots of positions kv0 .. kv0 + kBN - 1 into slots[buf].
  __device__ __forceinline__ void load_slots(int buf, int kv0) {
    if (tid < kBN) slots[buf][tid] = slot_of(kv0 + tid);
  }

  // The same for two tiles at once, kv0 .. kv0 + 2 kBN - 1 into slots[0] and slots[1] (a block of
  // at least 2 kBN threads: one round trip for both).
  __device__ __forceinline__ void load_slots_pair(int kv0) {
    static_assert(kThreads >= 2 * kBN, "a thread per position of the two tiles");
    if (tid < 2 * kBN) slots[tid / kBN][tid % kBN] = slot_of(kv0 + tid);
  }

  __device__ __forceinline__ __nv_bfloat16* dst(int buf, int mat, int i) const {  // mat 0: K, 1: V
    return smem + (2 * buf + mat) * kTileElems + (row0 + i * kRowStep) * kLd + cc * 8;
  }

  // Starts moving the tile whose slots are in slots[buf] into `buf`.
  __device__ __forceinline__ void fetch(int buf) { fetch(buf, buf); }

  // Starts moving the tile whose slots are in slots[slot_row] into `buf`.
  __device__ __forceinline__ void fetch(int buf, int slot_row) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int32_t slot = slots[slot_row][row0 + i * kRowStep];
      const bool ok = slot >= 0;
      const int64_t off = ok ? static_cast<int64_t>(slot) * kv_dim + head_off + cc * 8 : 0;
#pragma unroll
      for (int mat = 0; mat < 2; ++mat) {
        const KV* src = (mat == 0 ? kc : vc) + off;
        if constexpr (kAsync) {
          CpAsync16(SmemAddr(dst(buf, mat, i)), src, ok);
        } else if constexpr (sizeof(KV) == 1) {
          const uint2 raw = ok ? *reinterpret_cast<const uint2*>(src) : make_uint2(0, 0);
          if constexpr (kHold) {
            held[mat][i] = raw;
          } else {
            *reinterpret_cast<uint4*>(dst(buf, mat, i)) = ToBf16x8(raw);
          }
        } else {
          const float4 a = ok ? *reinterpret_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
          const float4 b = ok ? *reinterpret_cast<const float4*>(src + 4) : make_float4(0.f, 0.f, 0.f, 0.f);
          *reinterpret_cast<uint4*>(dst(buf, mat, i)) = ToBf16x8(a, b);
        }
      }
    }
    if constexpr (kAsync) CpAsyncCommit();
  }

  // fp8 held in registers: converts and stores them into `buf` (nothing for the other caches).
  __device__ __forceinline__ void put_held(int buf) {
    if constexpr (kHold) {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
#pragma unroll
        for (int mat = 0; mat < 2; ++mat) *reinterpret_cast<uint4*>(dst(buf, mat, i)) = ToBf16x8(held[mat][i]);
      }
    }
  }

  // Waits for this thread's cp.async copies of the tile before the newest one (more == true) or of
  // every tile (more == false); the caller's barrier then makes them visible to the block.
  __device__ __forceinline__ static void wait_copies(bool more) {
    if constexpr (kAsync) {
      if (more) {
        CpAsyncWait<1>();
      } else {
        CpAsyncWait<0>();
      }
    }
  }
};

}  // namespace tandem::kernels::tile
