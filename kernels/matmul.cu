#include "kernels/matmul.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/gemm.h"
#include "kernels/launch.cuh"
#include "kernels/matmul_batched.h"
#include "kernels/matvec.cuh"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 8;

// Grid (ceil(out / (W * R)), ceil(T / TT)): warp w of block b computes rows (b*W+w)*R .. +R for the
// TT tokens of tile blockIdx.y. The rows' first chunks are loaded before waiting for the previous
// kernel (weights never change during a step), so those loads overlap its tail. The shape (R, NL)
// comes from MatvecShape (matvec.cuh); W warps a block, at least kMinBlocks blocks an SM. With
// kPace > 1 (one row a warp) the early loads go out in kPace groups (LoadChunkPaced; `zero` is 0).
template <int R, int NL, int TT, int W = kWarps, int kMinBlocks = 1, int kPace = 1>
__global__ void __launch_bounds__(W * 32, kMinBlocks) MatmulKernel(float* y, const float* x, const uint16_t* w,
                                                                   int64_t T, int64_t in, int64_t out, uint32_t zero) {
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * W + threadIdx.x / 32) * R;
  if (o0 >= out) return;
  const uint16_t* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + (o0 + r < out ? o0 + r : o0) * in;  // rows past `out` are dropped
  uint4 buf[R][NL];
  if constexpr (kPace > 1) {
    static_assert(R == 1, "paced loads of one row a warp");
    LoadChunkPaced<NL, kPace>(buf[0], rows[0], in, lane, zero);
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) LoadChunk<NL>(buf[r], rows[r], 0, in, lane);
  }
  GridDepWait();
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * TT;
  const int nt = T - t0 < TT ? static_cast<int>(T - t0) : TT;
  RowsProduct<R, NL, TT, true>(y, x + t0 * in, buf, rows, in, out, o0, t0, nt, lane);
}

template <int R, int NL, int TT>
void LaunchShape(float* y, const float* x, const uint16_t* w, int64_t T, int64_t in, int64_t out, cudaStream_t s) {
  // One token with a whole 4096-wide row in each warp's registers before the wait (shape 116: the
  // o_proj of a batch-1 step, 16 MB held across the GPU while attention runs): 4-warp blocks capped
  // at 96 registers (5 blocks an SM), so that every row's block fits on the SMs beside attention's
  // blocks and is loading before attention ends. 8-warp blocks at 98 registers fit one per SM beside
  // an attention block (a quarter of the rows then started only after attention, and the router's
  // blocks, launched once all of o_proj's have started, with them). Same run on one H100, bf16
  // batch 1: 3.202 against 3.253 ms a step at 1k, 3.430 against 3.447 at 4k; in an earlier call
  // 2-warp blocks at 96 registers ran 3.222 / 3.442 beside these 3.212 / 3.436, and their timeline
  // has the router starting 11 us earlier in the layer (docs/bench/decode-h200.md, session 34).
  // Its 16 loads a lane go out in 8 groups of 2, each once the one before has landed: all 16 at once
  // put the 16 MB on the SMs ahead of attention's own post-wait reads, the step's critical path.
  // Same-run A/B on one H100, session 62, bf16 batch 1: 8 groups -4.0% a step at 1k, -3.9% at 4k;
  // 4 groups -2.3% / -0.9%, 2 groups -1.1% / 0.0%. (The FP8 and NVFP4 o_proj, the split product,
  // lost with the same pacing: +1.3% to +4.2% at 4 and 8 groups.)
  constexpr bool kWholeRow = R == 1 && NL == 16 && TT == 1;
  constexpr int W = kWholeRow ? 4 : kWarps, kMinBlocks = kWholeRow ? 5 : 1, kPace = kWholeRow ? 8 : 1;
  const int64_t rows_per_block = W * R;
  const dim3 grid(static_cast<unsigned>((out + rows_per_block - 1) / rows_per_block),
                  static_cast<unsigned>((T + TT - 1) / TT));
  Launch(MatmulKernel<R, NL, TT, W, kMinBlocks, kPace>, grid, dim3(W * 32), 0, s, y, x, w, T, in, out, 0u);
}

template <int TT>
void LaunchTile(float* y, const float* x, const uint16_t* w, int64_t T, int64_t in, int64_t out, cudaStream_t s) {
  DispatchMatvecShape<TT>(MatvecShape(in, TT, out), [&]<int R, int NL>() { LaunchShape<R, NL, TT>(y, x, w, T, in, out, s); });
}

}  // namespace

void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                 cudaStream_t stream, int64_t gemm_min_tokens) {
  KERNEL_REQUIRE(in % 8 == 0);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  if (T == 0 || out == 0) return;
  // Prefill: cuBLAS (gemm.h).
  if (UseGemmPath(T, gemm_min_tokens, stream) && gemm_bf16(y, x, w, T, in, out, stream)) return;
  // Decode batches: W read once per 32 tokens on the tensor cores (matmul_batched.h).
  if (T >= kMatmulBatchedMinTokens && MatmulBatchedSupported(in, out)) {
    matmul_batched(y, x, w, T, in, out, stream);
    return;
  }
  matvec_bf16(y, x, w, T, in, out, stream);
}

void matmul_bf16_float_input(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                             cudaStream_t stream, int64_t gemm_min_tokens) {
  KERNEL_REQUIRE(in % 8 == 0);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  if (T == 0 || out == 0) return;
  // Prefill: gemm.h.
  if (UseGemmPath(T, gemm_min_tokens, stream) && gemm_bf16_split(y, x, w, T, in, out, stream)) return;
  matvec_bf16(y, x, w, T, in, out, stream);
}

void matvec_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                 cudaStream_t stream) {
  KERNEL_REQUIRE(in % 8 == 0);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  if (T == 0 || out == 0) return;
  if (T == 1) {
    LaunchTile<1>(y, x, w, T, in, out, stream);
  } else if (T <= 4) {
    LaunchTile<4>(y, x, w, T, in, out, stream);
  } else {
    LaunchTile<8>(y, x, w, T, in, out, stream);
  }
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
