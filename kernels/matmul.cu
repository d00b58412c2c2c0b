#include "kernels/matmul.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/gemm.h"
#include "kernels/launch.cuh"
#include "kernels/matvec.cuh"

namespace tandem::kernels {

namespace {

constexpr int kWarps = 4;  // rows per block: small blocks spread a short product over every SM

// Grid (ceil(out / kWarps), ceil(T / TT)): warp w of block b computes row b*kWarps+w for the TT
// tokens of tile blockIdx.y. The row's first chunk is loaded before waiting for the previous kernel
// (weights never change during a step), so those loads overlap its tail.
template <int NL, int TT>
__global__ void __launch_bounds__(kWarps * 32) MatmulKernel(float* y, const float* x, const uint16_t* w, int64_t T,
                                                            int64_t in, int64_t out) {
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (o >= out) return;
  const uint16_t* row = w + o * in;
  uint4 buf[NL];
  LoadChunk<NL>(buf, row, 0, in, lane);
  GridDepWait();
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * TT;
  const int nt = T - t0 < TT ? static_cast<int>(T - t0) : TT;
  const float* xt = x + t0 * in;
  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;
  for (int64_t base = 0;;) {
    UseChunk<NL, TT>(acc, buf, xt, base, in, nt, lane);
    base += 256 * NL;
    if (base >= in) break;
    LoadChunk<NL>(buf, row, base, in, lane);
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = WarpSum(acc[t]);
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      if (t < nt) y[(t0 + t) * out + o] = acc[t];
    }
  }
}

template <int TT>
void LaunchTile(float* y, const float* x, const uint16_t* w, int64_t T, int64_t in, int64_t out, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((out + kWarps - 1) / kWarps), static_cast<unsigned>((T + TT - 1) / TT));
  const dim3 block(kWarps * 32);
  // Bigger token tiles hold TT accumulators per weight: cap the chunk at 8 loads there.
  const int nl = TT > 4 && ChunkLoads(in) > 8 ? 8 : ChunkLoads(in);
  switch (nl) {
    case 1: Launch(MatmulKernel<1, TT>, grid, block, 0, s, y, x, w, T, in, out); break;
    case 2: Launch(MatmulKernel<2, TT>, grid, block, 0, s, y, x, w, T, in, out); break;
    case 3: Launch(MatmulKernel<3, TT>, grid, block, 0, s, y, x, w, T, in, out); break;
    case 4: Launch(MatmulKernel<4, TT>, grid, block, 0, s, y, x, w, T, in, out); break;
    case 8: Launch(MatmulKernel<8, TT>, grid, block, 0, s, y, x, w, T, in, out); break;
    default: Launch(MatmulKernel<16, TT>, grid, block, 0, s, y, x, w, T, in, out); break;
  }
}

}  // namespace

void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                 cudaStream_t stream) {
  KERNEL_REQUIRE(in % 8 == 0);
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  if (T == 0 || out == 0) return;
  if (UseGemmPath(T, stream) && gemm_bf16(y, x, w, T, in, out, stream)) return;  // prefill: cuBLAS (gemm.h)
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
