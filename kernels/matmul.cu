#include "kernels/matmul.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/gemm.h"
#include "kernels/matvec.cuh"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 8;  // rows per block

// Grid (ceil(out / kWarps), ceil(T / TT)): warp w of block b computes row b*kWarps+w for the TT
// tokens of tile blockIdx.y.
template <int TT>
__global__ void __launch_bounds__(kWarps * 32) MatmulKernel(float* y, const float* x, const uint16_t* w,
                                                            int64_t T, int64_t in, int64_t out) {
  const int lane = threadIdx.x % 32;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (o >= out) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * TT;
  const int nt = T - t0 < TT ? static_cast<int>(T - t0) : TT;
  float acc[TT];
  RowDot<TT>(acc, w + o * in, x + t0 * in, in, nt, lane);
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      if (t < nt) y[(t0 + t) * out + o] = acc[t];
    }
  }
}

// Batch 1: each warp computes two adjacent rows with RowsDot (loads of both rows in flight).
// Grid ceil(out / (2 kWarps)).
__global__ void __launch_bounds__(kWarps * 32) MatvecKernel(float* y, const float* x, const uint16_t* w, int64_t in,
                                                            int64_t out) {
  const int lane = threadIdx.x % 32;
  const int64_t o = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * 2;
  if (o >= out) return;
  if (o + 1 < out) {
    const uint16_t* rows[2] = {w + o * in, w + (o + 1) * in};
    const float* xs[2] = {x, x};
    float acc[2];
    RowsDot<2>(acc, rows, xs, in, lane);
    if (lane == 0) y[o] = acc[0], y[o + 1] = acc[1];
  } else {
    const uint16_t* rows[1] = {w + o * in};
    const float* xs[1] = {x};
    float acc[1];
    RowsDot<1>(acc, rows, xs, in, lane);
    if (lane == 0) y[o] = acc[0];
  }
}

}  // namespace

void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                 cudaStream_t stream) {
  KERNEL_REQUIRE(in % 8 == 0);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  if (T == 0 || out == 0) return;
  if (UseGemmPath(T, stream) && gemm_bf16(y, x, w, T, in, out, stream)) return;  // prefill: cuBLAS (gemm.h)
  const unsigned blocks = static_cast<unsigned>((out + kWarps - 1) / kWarps);
  // Fewer register-held accumulators for a single token (decode at batch 1).
  if (T == 1) {
    const unsigned pair_blocks = static_cast<unsigned>((out + 2 * kWarps - 1) / (2 * kWarps));
    MatvecKernel<<<pair_blocks, kWarps * 32, 0, stream>>>(y, x, w, in, out);
  } else if (T <= 4) {
    MatmulKernel<4><<<dim3(blocks, 1), kWarps * 32, 0, stream>>>(y, x, w, T, in, out);
  } else {
    MatmulKernel<8><<<dim3(blocks, static_cast<unsigned>((T + 7) / 8)), kWarps * 32, 0, stream>>>(
        y, x, w, T, in, out);
  }
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
