// The split order of a row of x, for the one-token split products (kernels/quant_split_matvec.cuh)
// over NVFP4 weights. Load j of a row covers its columns 32j .. 32j + 31, and the lane that issues it
// reads those 32 x values as 8 float4s. In row order the 32 lanes of a warp then touch 32 different
// 128-byte lines with every float4 they read, and those reads come after the weights land, on the
// kernel's critical path. In the split order, float4 s of load j sits at s * (cols / 32) + j, so each
// of a warp's 8 float4 reads is 512 contiguous bytes (docs/bench/decode-h200.md, session 54).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TANDEM_SPLIT_ORDER_HD __host__ __device__
#else
#define TANDEM_SPLIT_ORDER_HD
#endif

namespace tandem::kernels {

constexpr int64_t kSplitOrderQuads = 8;  // float4s a 32-column load reads
constexpr int kSplitOrderFloats = 4;     // floats a float4 of the order holds

// Where float4 q of a row of `cols` columns (cols % 32 == 0) sits in the row's split order, in float4s.
TANDEM_SPLIT_ORDER_HD constexpr int64_t SplitOrderQuad(int64_t q, int64_t cols) {
  return (q % kSplitOrderQuads) * (cols / 32) + q / kSplitOrderQuads;
}

// The inverse: which float4 of the row sits at position o of its split order (a writer that stores
// the split order in turn, coalesced, reads its sources with it).
TANDEM_SPLIT_ORDER_HD constexpr int64_t SplitOrderSource(int64_t o, int64_t cols) {
  return (o % (cols / 32)) * kSplitOrderQuads + o / (cols / 32);
}

}  // namespace tandem::kernels

#undef TANDEM_SPLIT_ORDER_HD
