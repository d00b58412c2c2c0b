// moe_batched over quantized expert stacks (moe_batched.h's moe_batched_quant): the bf16 kernel of
// moe_batched.cuh with each staged weight tile widened to bf16 in registers (quant_widen.cuh), so a
// chosen expert is read once a step in its own format for all of its tokens, where the per-token
// kernels (quant_moe.h) read it once per token that chose it.
//   FP8: a staged row is 64 e4m3 bytes (4 pieces); a scale block's partial sums are scaled once in
//        float32 (row g's and row g + 8's scale) where the block ends: at the end of a chunk when
//        blocks hold whole chunks (block_in >= 64, col_phase % 64 == 0: Qwen's checkpoints up to
//        TP 4), else at the end of a 32-wide k step (32-blocks, TP 8's shards), a second kernel
//        (checking at every k step made the first layout 1-1.5% slower at 32 tokens).
//   NVFP4: a staged row is 32 bytes of codes (2 pieces) and 4 e4m3 group scales; each code times its
//        group scale enters the mma exactly, the row's second scale multiplies the result.
#include "kernels/cuda_check.h"
#include "kernels/moe_batched.cuh"
#include "kernels/moe_batched.h"
#include "kernels/quant_widen.cuh"

namespace tandem::kernels {

namespace {

using moe_batched_detail::kChunk;
using moe_batched_detail::kSmemBytes;
using mma_rows::kNTiles;

using Acc = float[2][kNTiles][4];

struct Fp8Stack {
  const uint8_t* data;
  const float* scales;
  int64_t data_stride, scale_stride, scale_cols, row_block;
  int32_t col_phase, shift;  // block_in = 1 << shift
};

// kStepBlocks: the layout's scale blocks may end inside a chunk (see the top of the file).
template <bool kStepBlocks>
struct Fp8Tiles {
  static constexpr int kRowBytes = kChunk;  // 4 pieces
  static constexpr int kScaleBytes = 0;
  static constexpr int kPieceElems = 16;
  static constexpr bool kBlockScaled = true;
  static constexpr bool kBlocksEndInsideChunks = kStepBlocks;
  static constexpr int kStages = 4;  // 66 KB: three blocks an SM on the H200 (164-167 registers)
  using Src = mma_rows::SharedFloatRows;
  using Stack = Fp8Stack;
  struct Expert {
    const uint8_t* data;
    const float* scales;
    int64_t scale_cols, row_block;
  };
  struct RowState {
    const float* srow[4];
  };

  // The lane's 8 bytes of k step s are half (c % 2) of piece 2s + c / 2. A warp's 8-byte loads
  // cover rows g = 0..7 (64 bytes apart, so rows 2 apart share banks) with pieces 2s and 2s + 1;
  // XOR-ing the piece with bit 1 of the row (into bit 1) and bit 2 (into bit 0) sends rows g, g + 2,
  // g + 4, g + 6 to four different piece pairs: every half-warp's 128 bytes hit distinct banks.
  __device__ static int Swizzle(int r) { return (((r >> 1) & 1) << 1) | ((r >> 2) & 1); }
  __device__ static Expert ExpertOf(const Stack& st, int e, int64_t, int64_t) {
    return {st.data + e * st.data_stride, st.scales + e * st.scale_stride, st.scale_cols, st.row_block};
  }
  __device__ static const void* PieceAddr(const Expert& ex, int64_t row, int64_t kdim, int64_t k0, int piece) {
    return ex.data + row * kdim + k0 + 16 * piece;
  }
  __device__ static RowState RowStateOf(const Expert& ex, const int64_t (&rows)[4]) {
    RowState rs;
#pragma unroll
    for (int i = 0; i < 4; ++i) rs.srow[i] = ex.scales + (rows[i] / ex.row_block) * ex.scale_cols;
    return rs;
  }
  __device__ static uint4 Widen(const unsigned char* row, const unsigned char*, int s, int c, int swizzle) {
    return Fp8EightToBf16(*reinterpret_cast<const uint2*>(row + ((2 * s + c / 2) ^ swizzle) * 16 + (c % 2) * 8));
  }
  __device__ static int64_t BlockOf(const Stack& st, int64_t k) { return (k + st.col_phase) >> st.shift; }
  // acc += scale * part over the tile's nt n-tiles (the others stay zero), part back to zero.
  __device__ static void AddScaled(Acc& acc, Acc& part, const RowState& rs, int64_t blk, int nt) {
    float s[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) s[i] = __ldg(rs.srow[i] + blk);
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        if (j >= nt) break;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          acc[m][j][e] = fmaf(s[2 * m + e / 2], part[m][j][e], acc[m][j][e]);
          part[m][j][e] = 0.0f;
        }
      }
    }
  }
  __device__ static void ScaleRows(Acc&, const RowState&) {}
};

struct Nvfp4Tiles {
  static constexpr int kRowBytes = kChunk / 2;  // 2 pieces
  static constexpr int kScaleBytes = kChunk / 16;
  static constexpr int kPieceElems = 32;
  static constexpr bool kBlockScaled = false;
  static constexpr int kStages = 4;  // 52 KB: four blocks an SM on the H200 (128 registers)
  using Src = mma_rows::SharedFloatRowsSpread;
  struct Stack {
    const uint8_t* data;
    const uint8_t* group_scales;
    const float* row_scale2;
    int64_t data_stride, group_stride, row_stride;
  };
  struct Expert {
    const uint8_t* data;
    const uint8_t* group_scales;
    const float* row_scale2;
  };
  struct RowState {
    float factor[4];  // the row's second scale times 2^14 (Nvfp4EightToBf16 leaves 2^-14)
  };

  // The lane's 4 bytes of k step s are word c of piece s; rows 32 bytes apart, so rows g and g + 4
  // share banks: XOR-ing the piece with bit 2 of the row makes a warp's 128 bytes conflict-free.
  __device__ static int Swizzle(int r) { return (r >> 2) & 1; }
  __device__ static Expert ExpertOf(const Stack& st, int e, int64_t, int64_t) {
    return {st.data + e * st.data_stride, st.group_scales + e * st.group_stride, st.row_scale2 + e * st.row_stride};
  }
  __device__ static const void* PieceAddr(const Expert& ex, int64_t row, int64_t kdim, int64_t k0, int piece) {
    return ex.data + row * (kdim / 2) + k0 / 2 + 16 * piece;
  }
  // The row's 4 group scales of the chunk (kdim % 64 == 0: 4-byte aligned, always whole).
  __device__ static void StageScales(unsigned char* dst, const Expert& ex, int64_t row, int64_t kdim, int64_t k0) {
    CpAsync4(SmemAddr(dst), row >= 0 ? ex.group_scales + row * (kdim / 16) + k0 / 16 : ex.group_scales, row >= 0);
  }
  __device__ static RowState RowStateOf(const Expert& ex, const int64_t (&rows)[4]) {
    RowState rs;
#pragma unroll
    for (int i = 0; i < 4; ++i) rs.factor[i] = __ldg(ex.row_scale2 + rows[i]) * 16384.0f;
    return rs;
  }
  __device__ static uint4 Widen(const unsigned char* row, const unsigned char* scales, int s, int c, int swizzle) {
    return Nvfp4EightToBf16(*reinterpret_cast<const uint32_t*>(row + (s ^ swizzle) * 16 + 4 * c),
                            scales[2 * s + c / 2]);
  }
  __device__ static void ScaleRows(Acc& acc, const RowState& rs) { mma_rows::ScaleRows<2>(acc, rs.factor); }
};

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether a scale block of the layout holds whole chunks (else only whole 32-wide k steps).
bool Fp8ChunkBlocks(const QuantMatrix& W) { return W.block_shift(kChunk) >= 0; }

// The FP8 stack's fields, or false where the kernels do not take its layout: a scale block must
// hold whole k steps of 32 columns.
bool Fp8StackOf(const QuantMatrix& W, Fp8Stack* st) {
  const int32_t shift = W.block_shift(32);
  if (shift < 0 || W.row_block < 1 || !Aligned16(W.data)) return false;
  *st = {static_cast<const uint8_t*>(W.data), W.scales, W.data_bytes(), W.scale_stride(), W.scale_cols(), W.row_block,
         static_cast<int32_t>(W.col_phase), shift};
  return true;
}

// The NVFP4 stack's fields, or false where the kernel does not take its layout (cols % 64: a
// chunk's 4 group scales are one aligned word).
bool Nvfp4StackOf(const QuantMatrix& W, Nvfp4Tiles::Stack* st) {
  if (W.cols % kChunk != 0 || !Aligned16(W.data) || reinterpret_cast<uintptr_t>(W.group_scales) % 4 != 0) return false;
  *st = {static_cast<const uint8_t*>(W.data), W.group_scales, W.row_scale2, W.data_bytes(), W.group_scale_stride(),
         W.row_scale2_stride()};
  return true;
}

}  // namespace

bool MoeBatchedQuantSupported(const QuantMatrix& gate_up, const QuantMatrix& down, int64_t H, int64_t I) {
  if (!MoeBatchedSupported(H, I) || gate_up.format != down.format || gate_up.rows != 2 * I || gate_up.cols != H ||
      down.rows != H || down.cols != I || gate_up.count != down.count) {
    return false;
  }
  switch (gate_up.format) {
    case WeightFormat::kFp8Block: {
      Fp8Stack a, b;
      return Fp8StackOf(gate_up, &a) && Fp8StackOf(down, &b) && MaxSmemPerBlock() >= kSmemBytes<Fp8Tiles<false>>;
    }
    case WeightFormat::kNvfp4: {
      Nvfp4Tiles::Stack a, b;
      return Nvfp4StackOf(gate_up, &a) && Nvfp4StackOf(down, &b) && MaxSmemPerBlock() >= kSmemBytes<Nvfp4Tiles>;
    }
    default: return false;
  }
}

void moe_batched_quant(float* out, float* act, const float* x, const int32_t* ids, const float* weights,
                       const QuantMatrix& gate_up, const QuantMatrix& down, int64_t T, int64_t K, int64_t H, int64_t I,
                       void* scratch, cudaStream_t stream) {
  KERNEL_REQUIRE(MoeBatchedQuantSupported(gate_up, down, H, I));
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(scratch) % 16 == 0);
  if (T * K == 0) return;
  const int64_t E = gate_up.count;
  if (gate_up.format == WeightFormat::kFp8Block) {
    Fp8Stack gu, dn;
    Fp8StackOf(gate_up, &gu);
    Fp8StackOf(down, &dn);
    if (Fp8ChunkBlocks(gate_up) && Fp8ChunkBlocks(down)) {
      moe_batched_detail::Run<Fp8Tiles<false>>(out, act, x, ids, weights, gu, dn, T, K, H, I, E, scratch, stream);
    } else {
      moe_batched_detail::Run<Fp8Tiles<true>>(out, act, x, ids, weights, gu, dn, T, K, H, I, E, scratch, stream);
    }
  } else {
    Nvfp4Tiles::Stack gu, dn;
    Nvfp4StackOf(gate_up, &gu);
    Nvfp4StackOf(down, &dn);
    moe_batched_detail::Run<Nvfp4Tiles>(out, act, x, ids, weights, gu, dn, T, K, H, I, E, scratch, stream);
  }
}

}  // namespace tandem::kernels
