#include "kernels/moe_batched.h"

#include "kernels/cuda_check.h"
#include "kernels/moe_batched.cuh"

namespace tandem::kernels {

namespace {

using moe_batched_detail::kSmemBytes;

// bf16 experts: a staged row is 64 bf16 (128 bytes, 8 pieces); the lane's 16 bytes of a k step are
// already the four bf16 pairs.
struct Bf16Tiles {
  static constexpr int kRowBytes = moe_batched_detail::kChunk * 2;
  static constexpr int kScaleBytes = 0;
  static constexpr int kPieceElems = 8;
  static constexpr bool kBlockScaled = false;
  static constexpr int kStages = 4;  // 98 KB: two blocks an SM on the H200, one on the GB10
  using Src = mma_rows::SharedFloatRows;
  struct Stack {
    const uint16_t* w;  // (E, rows, kdim)
  };
  using Expert = const uint16_t*;
  struct RowState {};

  // Piece p of staged weight row r lies at piece p ^ Swizzle(r). A warp's 16-byte loads run in
  // phases of 8 lanes, rows g = 2q and 2q + 1 with pieces 4s + c (c < 4) of k step s: Swizzle sends
  // the two rows' pieces to opposite halves of the 128-byte row, so the 8 loads hit 8 different bank
  // groups; the copies (8 threads a row, all 8 pieces) are conflict-free under any permutation. The
  // token rows need no swizzle: 272 bytes apart, rows g and g + 1 start 16 bytes apart in the banks.
  __device__ static int Swizzle(int r) { return ((r & 1) << 2) | ((r >> 1) & 3); }
  __device__ static Expert ExpertOf(const Stack& st, int e, int64_t rows, int64_t kdim) {
    return st.w + static_cast<int64_t>(e) * rows * kdim;
  }
  __device__ static const void* PieceAddr(Expert ex, int64_t row, int64_t kdim, int64_t k0, int piece) {
    return ex + row * kdim + k0 + 8 * piece;
  }
  __device__ static RowState RowStateOf(Expert, const int64_t (&)[4]) { return {}; }
  __device__ static uint4 Widen(const unsigned char* row, const unsigned char*, int s, int c, int swizzle) {
    return *reinterpret_cast<const uint4*>(row + ((4 * s + c) ^ swizzle) * 16);
  }
  template <typename Acc>
  __device__ static void ScaleRows(Acc&, const RowState&) {}
};

}  // namespace

bool MoeBatchedSupported(int64_t H, int64_t I) {
  return H > 0 && I > 0 && H % 32 == 0 && I % 32 == 0 && MaxSmemPerBlock() >= kSmemBytes<Bf16Tiles>;
}

size_t MoeBatchedScratchBytes(int64_t T, int64_t K, int64_t H, int64_t /*I*/) {
  return moe_batched_detail::ScratchBytes(T, K, H);
}

void moe_batched(float* out, float* act, const float* x, const int32_t* ids, const float* weights,
                 const bf16_bits* gate_up, const bf16_bits* down, int64_t T, int64_t K, int64_t H, int64_t I,
                 int64_t E, void* scratch, cudaStream_t stream) {
  KERNEL_REQUIRE(MoeBatchedSupported(H, I));
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(scratch) % 16 == 0);
  if (T * K == 0) return;
  moe_batched_detail::Run<Bf16Tiles>(out, act, x, ids, weights, {reinterpret_cast<const uint16_t*>(gate_up)},
                                     {reinterpret_cast<const uint16_t*>(down)}, T, K, H, I, E, scratch, stream);
}

}  // namespace tandem::kernels
