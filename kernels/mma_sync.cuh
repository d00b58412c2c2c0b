// The warp-level tensor-core instructions the tiled kernels share: ldmatrix fragment loads from
// shared memory and bf16 mma.sync m16n8k16 with float accumulation (PTX ISA "mma.m16n8k16" and
// "ldmatrix" fragment layouts). Plain sm_80 instructions: the same code runs on the H200 (sm_90)
// and the DGX Spark's GB10 (sm_121); with them, the bf16 pair packing of their fragments. Users:
// attention_tile.cuh (attention), mma_rows.cuh and quant_widen.cuh (decode batches), moe_gemm_mma.cuh
// (the prefill MoE GEMM).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace tandem::kernels {

// Floats (lo, hi) rounded to nearest even as a bf16 pair in one instruction (cvt.rn.bf16x2.f32), lo
// in the low half: the order the mma fragments give a pair of columns.
__device__ __forceinline__ uint32_t PackFloatsBf16(float lo, float hi) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
  uint32_t bits;
  static_assert(sizeof(p) == sizeof(bits));
  memcpy(&bits, &p, sizeof bits);
  return bits;
}

// Four 8x8 b16 matrices: lanes 8i..8i+7 give the shared-memory addresses of matrix i's rows (16
// bytes each); r[i] is matrix i, lane l holding row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// The same, each matrix transposed on the way.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d (16x8 float) += A (16x16 bf16, row-major fragment a0..a3) B (16x8 bf16, column-major b0, b1).
__device__ __forceinline__ void Mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // built for sm_90 and sm_121 only (CMAKE_CUDA_ARCHITECTURES)
#endif
}

__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  Mma16816(d, a[0], a[1], a[2], a[3], b0, b1);
}

}  // namespace tandem::kernels
