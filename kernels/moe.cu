#include "kernels/moe.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/gemm.h"
#include "kernels/l2_prefetch.h"
#include "kernels/launch.cuh"
#include "kernels/matvec.cuh"
#include "kernels/moe_gemm.h"

namespace tandem::kernels {

namespace {

constexpr int kGateUpWarps = 4;
constexpr int kDownWarps = 8;      // one warp per expert slot k (k, k+8, ... when K > 8)
constexpr int kDownRows = 4;       // output rows per block in moe_down
// Loads per lane per row chunk in both expert kernels: one (a warp reads 512 bytes of each of its
// rows per round). Unlike the dense products, more blocks beat more loads per warp here: with one
// load the kernels need 37 (gate_up) and 64 (down) registers, so every block of a batch-1 layer is
// resident at once and starts loading as soon as its wait ends. Measured on the H200, batch 1 /
// 8 / 32 at ctx 1k, per step: 3.406 / 18.04 / 65.9 ms with the whole row in flight (8 and 3
// loads), 3.092 / 15.94 / 56.6 ms with one (docs/bench/decode-h200.md).
constexpr int kMoeLoads = 1;

// Grid (ceil(I / kGateUpWarps), T*K): warp computes row i of gate and of up for pair blockIdx.y,
// both rows' chunks in flight together. The expert id comes from the router kernel, so nothing
// can be loaded before GridDepWait. The kernel lets moe_down launch only after that wait: moe_down
// then knows the router has finished and loads its experts' weights while this kernel streams.
__global__ void __launch_bounds__(kGateUpWarps * 32) MoeGateUpKernel(float* act, const float* x, const int32_t* ids,
                                                                     const uint16_t* gate_up, int64_t K, int64_t H,
                                                                     int64_t I, L2Prefetch next) {
  const int lane = threadIdx.x % 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kGateUpWarps + threadIdx.x / 32;
  const int64_t p = blockIdx.y;
  PrefetchL2(next);
  if (i >= I) return;
  GridDepWait();
  GridDepLaunchDependents();
  const uint16_t* we = gate_up + static_cast<int64_t>(ids[p]) * 2 * I * H;
  const float* xt = x + (p / K) * H;
  const uint16_t* rows[2] = {we + i * H, we + (I + i) * H};  // gate row i, up row i
  const float* xs[2] = {xt, xt};
  float gu[2];
  RowsDot<2, kMoeLoads>(gu, rows, xs, H, lane);
  if (lane == 0) act[p * I + i] = SiluF(gu[0]) * gu[1];
}

// Grid (ceil(H / kDownRows), T): warp k of the block computes rows h0..h0+kDownRows of expert slots
// k, k+8, ... of token t (weighted), the block sums the slots in a fixed order (deterministic).
// With `early` (this launch directly follows moe_gate_up's decode kernel, which lets it launch only
// after its own wait, so the router's ids are complete when it starts) each warp issues the first
// chunk of its first slot's rows before waiting for the activations, overlapping moe_gate_up.
__global__ void __launch_bounds__(kDownWarps * 32) MoeDownKernel(float* out, const float* act, const int32_t* ids,
                                                                 const float* weights, const uint16_t* down, int64_t K,
                                                                 int64_t H, int64_t I, bool early) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t h0 = static_cast<int64_t>(blockIdx.x) * kDownRows, t = blockIdx.y;
  __shared__ float partial[kDownWarps][kDownRows];
  const uint16_t* rows[kDownRows];
  uint4 buf[kDownRows][kMoeLoads];
  const auto load_slot = [&](int64_t k) {  // rows past H recompute row h0 and are dropped
    const uint16_t* base = down + (static_cast<int64_t>(__ldcg(ids + t * K + k)) * H + h0) * I;
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      rows[r] = base + (h0 + r < H ? r : 0) * I;
      LoadChunk<kMoeLoads>(buf[r], rows[r], 0, I, lane);
    }
  };
  if (early && warp < K) load_slot(warp);
  GridDepWait();
  // The next kernel (the next layer's first) launches only after this wait, not at the block's start:
  // its early weight loads (the q/k/v product's: 21 MB in bf16) then no longer compete with moe_gate_up's
  // expert loads, which this wait follows. Same-run A/B, one H100, session 50, on top of
  // attention_decode's later trigger: NVFP4 batch 1 -0.9% (1k and 4k), bf16 and FP8 within +-0.4%
  // (docs/bench/decode-h200.md). The quantized down kernels do the same.
  GridDepLaunchDependents();
  float sum[kDownRows] = {};
  for (int64_t k = warp; k < K; k += kDownWarps) {
    if (k != warp || !early) load_slot(k);
    const int64_t p = t * K + k;
    float d[kDownRows][1];
    RowsDotLoaded<kDownRows, kMoeLoads, 1, true>(d, buf, rows, act + p * I, I, 1, lane);
    const float wk = weights[p];
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) sum[r] += wk * d[r][0];
  }
  StoreSlotSums<kDownWarps, kDownRows>(out + t * H, partial, sum, h0, H, warp, lane);
}

}  // namespace

void moe_gate_up(float* act, const float* x, const int32_t* ids, const bf16_bits* gate_up, int64_t T,
                 int64_t K, int64_t H, int64_t I, cudaStream_t stream, int64_t gemm_min_tokens, L2Prefetch next) {
  KERNEL_REQUIRE(H % 8 == 0);
  if (T == 0) return;
  // Prefill: grouped tensor-core GEMM over the pairs sorted by expert (moe_gemm.h).
  if (UseGemmPath(T, gemm_min_tokens, stream) && moe_gate_up_grouped(act, x, ids, gate_up, T, K, H, I, stream)) {
    return;
  }
  const dim3 grid(static_cast<unsigned>((I + kGateUpWarps - 1) / kGateUpWarps), static_cast<unsigned>(T * K));
  const dim3 block(kGateUpWarps * 32);
  Launch(MoeGateUpKernel, grid, block, 0, stream, act, x, ids, gate_up, K, H, I, next);
  KERNEL_CHECK();
}

void moe_down(float* out, const float* act, const int32_t* ids, const float* weights, const bf16_bits* down,
              int64_t T, int64_t K, int64_t H, int64_t I, cudaStream_t stream, bool follows_gate_up,
              int64_t gemm_min_tokens) {
  KERNEL_REQUIRE(I % 8 == 0);
  if (T == 0) return;
  const bool gemm = UseGemmPath(T, gemm_min_tokens, stream);
  if (gemm && moe_down_grouped(out, act, ids, weights, down, T, K, H, I, stream)) return;
  // Off the GEMM path moe_gate_up took its decode kernel too (the one that triggers late). The early
  // loads won their A/B (docs/bench/decode-h200.md: 3.424 vs 3.540 ms per batch-1 step at ctx 1k).
  const bool early = follows_gate_up && !gemm;
  const dim3 grid(static_cast<unsigned>((H + kDownRows - 1) / kDownRows), static_cast<unsigned>(T));
  const dim3 block(kDownWarps * 32);
  Launch(MoeDownKernel, grid, block, 0, stream, out, act, ids, weights, down, K, H, I, early);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
