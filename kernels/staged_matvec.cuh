// The one-token product after a residual add and RMSNorm, its weights staged in shared memory
// before the kernel waits for its predecessor (batch-1 decode: the q/k/v product after the previous
// layer's experts). The register-held forms (norm_matmul.cu; quant_split_matvec.cuh after a separate
// norm) can load early only the rows their resident blocks hold in registers, and at batch 1 the
// kernel before them (the experts' down product) fills the register file, so most of q/k/v's bytes
// were read after it ended (docs/bench/decode-h200.md, sessions 33-35). Here a block owns a run of
// rows (one block an SM) and copies them into a ring of shared-memory slots with cp.async (no
// registers held), the whole run where it fits; after the wait it norms the token into shared memory
// and multiplies slot by slot, refilling each freed slot with the next rows of its run.
//
// A format is a policy P as in quant_split_matvec.cuh (Matrix, Row, Raw, cols, loads_per_row, and Dot
// with kSharedX = true: x read from shared memory), plus:
//   P::StageRow(dst, m, r, t, n)        thread t of n issues the cp.async copies of row r's bytes
//                                        (weights and scales) into shared memory at dst;
//   P::StagedRowOf(m, r, srow)          row r's Row, staged at srow;
//   P::FetchStaged(raw, m, row, srow, j)  load j of the row staged at srow.
// The staged row's bytes (a multiple of 16) are the launcher's to compute (its format's layout).
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/carveout.h"
#include "kernels/cp_async.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/norm_row.cuh"
#include "kernels/staged_norm_matmul.h"
#include "kernels/staged_plan.h"

namespace tandem::kernels::detail {

// cp.async.wait_group for a count known only at run time: waits until at most n of this thread's
// committed groups are pending (n above 7 waits as for 7: correct, since groups complete in order,
// only less overlapped).
__device__ __forceinline__ void CpAsyncWaitPending(int n) {
  switch (n) {
    case 0: CpAsyncWait<0>(); break;
    case 1: CpAsyncWait<1>(); break;
    case 2: CpAsyncWait<2>(); break;
    case 3: CpAsyncWait<3>(); break;
    case 4: CpAsyncWait<4>(); break;
    case 5: CpAsyncWait<5>(); break;
    case 6: CpAsyncWait<6>(); break;
    default: CpAsyncWait<7>(); break;
  }
}

// Waits (thread 0 polling, the block after it) until *ready >= count: the staged kernel launched
// ahead on a second stream, whose input the experts' down product of the layer before signals
// (kernels::signal_done after the ffn) instead of a launch boundary. The polling load is an acquire
// at GPU scope and the inputs are then read from L2 (norm_row.cuh). A producer that never comes is a
// bug, not a state to wait in: after 5 s on the GPU's global timer the kernel traps, which fails the
// step with an error instead of hanging it (the wait it replaces lasts tens of microseconds).
__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void WaitReady(const uint32_t* ready, uint32_t count) {
  if (threadIdx.x == 0) {
    const uint64_t give_up = GlobalTimerNs() + 5'000'000'000ull;
    for (;;) {
      uint32_t v;
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ready) : "memory");
      if (v >= count) break;
      if (GlobalTimerNs() > give_up) __trap();
      __nanosleep(128);
    }
    __threadfence();
  }
  __syncthreads();
}

// Grid (ceil(out / rows_per_block)), WARPS * 32 threads, dynamic shared memory: with kNorm x as
// float32 (cols) and the norm's weights (cols bf16), then `slots` slots of G = WARPS * RW rows of
// row_bytes each. Block b
// owns rows b * rows_per_block .. + rows_per_block - 1 (fewer in the last block), taken in groups of
// G: group g fills slot g % slots; warp w multiplies rows w * RW .. + RW - 1 of a group, each lane
// loads j = lane, lane + 32, ... of them (sums: float32 per lane, then the warp's shuffle tree: a
// fixed order). Before the wait: the first `slots` groups and the norm's weights (group 0). After:
// r = x_in + delta and xn = rmsnorm(r) * (w_offset + norm_w) into shared memory (block 0 also stores
// r to x_out and, when not null, xn to xn_out), then the groups. Without kNorm x_in is the product's
// input as it is (read from global memory; delta, norm_w, x_out and xn_out unused): the staged
// product alone, after a separate norm kernel. With `ready` the kernel also waits, after its
// copies, until *ready reaches ready_count (WaitReady: launched ahead of its input on another
// stream). kLean asks for as many blocks an SM as its threads allow: 32 registers a thread on sm_90
// (2,048 threads an SM), so that a block launched ahead fits beside the router's, top-k's and
// experts' blocks, which hold all but 4 K registers of an SM; 40 on sm_12x (the GB10: 1,536).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr int kThreadsPerSm = 1536;
#else
constexpr int kThreadsPerSm = 2048;
#endif
template <class P, int RW, int WARPS, bool kNorm, bool kLean>
__global__ void __launch_bounds__(WARPS * 32, kLean ? kThreadsPerSm / (WARPS * 32) : 0)
    StagedNormMatvecKernel(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                           const uint16_t* norm_w, typename P::Matrix m, int64_t out, int rows_per_block, int slots,
                           int row_bytes, float eps, float w_offset, const uint32_t* ready, uint32_t ready_count) {
  constexpr int kThreads = WARPS * 32, G = WARPS * RW;
  extern __shared__ __align__(16) unsigned char staged_smem[];
  __shared__ float red[WARPS];
  GridDepLaunchDependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int cols = P::cols(m);
  float4* sx4 = reinterpret_cast<float4*>(staged_smem);
  uint16_t* snw = reinterpret_cast<uint16_t*>(staged_smem + static_cast<int64_t>(cols) * 4);
  unsigned char* ring = staged_smem + (kNorm ? static_cast<int64_t>(cols) * 6 : 0);  // cols % 8 == 0: aligned
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int nr = static_cast<int>(out - r0 < rows_per_block ? out - r0 : rows_per_block);
  const int groups = (nr + G - 1) / G;
  const int group_bytes = G * row_bytes;
  // One commit per call, empty past the last group: the count of pending groups stays `slots`.
  const auto stage = [&](int g) {
    if (g < groups) {
      unsigned char* dst = ring + (g % slots) * group_bytes;
      for (int r = 0; r < G && g * G + r < nr; ++r) {
        P::StageRow(dst + r * row_bytes, m, r0 + g * G + r, threadIdx.x, kThreads);
      }
    }
    CpAsyncCommit();
  };
  if constexpr (kNorm) {
    for (int i = threadIdx.x; i < cols / 8; i += kThreads) CpAsync16(SmemAddr(snw + 8 * i), norm_w + 8 * i, true);
  }
  for (int g = 0; g < slots; ++g) stage(g);
  GridDepWait();
  if (ready != nullptr) WaitReady(ready, ready_count);

  if constexpr (kNorm) {
    const int64_t nv = cols / 4;
    const float4* dr = delta != nullptr ? reinterpret_cast<const float4*>(delta) : nullptr;
    const float ss = WarpSum(AddRowToShared<kThreads>(sx4, reinterpret_cast<const float4*>(x_in), dr, nv, threadIdx.x));
    if (lane == 0) red[warp] = ss;
    CpAsyncWaitPending(slots - 1);  // group 0: the norm's weights and the first rows (this thread's copies)
    __syncthreads();                // everyone's copies and sums
    float total = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) total += red[w];
    NormaliseRow(sx4, x_out, xn_out, snw, nv, rsqrtf(total / static_cast<float>(cols) + eps), w_offset,
                 blockIdx.x == 0, threadIdx.x, kThreads);
    __syncthreads();  // the normed x complete
  }

  const float* x = kNorm ? reinterpret_cast<const float*>(staged_smem) : x_in;
  const int nj = P::loads_per_row(m);
  for (int g = 0; g < groups; ++g) {
    if (g > 0 || !kNorm) {
      CpAsyncWaitPending(slots - 1);  // group g (slots groups were committed after g - slots)
      __syncthreads();
    }
    const unsigned char* slot = ring + (g % slots) * group_bytes;
    const int first = g * G + warp * RW;  // the warp's rows in the run (warp-uniform)
    if (first < nr) {
      typename P::Row rows[RW];
#pragma unroll
      for (int r = 0; r < RW; ++r) rows[r] = P::StagedRowOf(m, r0 + first + r, slot + (warp * RW + r) * row_bytes);
      float acc[RW] = {};
      for (int j = lane; j < nj; j += 32) {
        typename P::Raw raw[RW];
#pragma unroll
        for (int r = 0; r < RW; ++r) P::FetchStaged(raw[r], m, rows[r], slot + (warp * RW + r) * row_bytes, j);
        P::template Dot<RW, kNorm>(acc, raw, m, rows, x, j);
      }
#pragma unroll
      for (int r = 0; r < RW; ++r) {  // rows past the run (the last group's) were never staged: dropped
        const float s = WarpSum(acc[r]);
        if (lane == 0 && first + r < nr) y[r0 + first + r] = s;
      }
    }
    __syncthreads();  // every warp is done with this slot
    stage(g + slots);
  }
}

// The shared memory per SM that the step's kernels ask for under kFitDecodeAttention (the split
// the driver gives them: carveout.h), or 0 when this thread's launches do not ask for that split.
// The staged products take their slots from it and only under it: their large blocks would
// otherwise make the driver switch the SMs' split around them.
int StagedSmemPerSm();

// Launches the staged product of y (out) = xn W^T as PlanStaged (kernels/staged_plan.h) cuts it
// (`norm`: the kernel's kNorm) and returns true; returns false, launching nothing, where the plan
// does not apply. `row_bytes`: a staged row's bytes (a multiple of 16). With `ready` (norm only) the
// lean blocks wait for the counter after their copies (StagedReady, kernels/staged_norm_matmul.h).
template <class P>
bool LaunchStagedNormMatvec(bool norm, float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                            const uint16_t* norm_w, const typename P::Matrix& m, int64_t cols, int64_t out,
                            int64_t row_bytes, float eps, float w_offset, cudaStream_t stream,
                            const StagedReady* ready = nullptr) {
  const int64_t per_sm = StagedSmemPerSm();
  if (per_sm == 0) return false;
  const StagedDevice device{per_sm, MaxSmemPerBlock(), CurrentDeviceAttribute(cudaDevAttrReservedSharedMemoryPerBlock),
                            SmCount()};
  const std::optional<StagedPlan> plan =
      PlanStaged(device, cols, out, row_bytes, norm, ready != nullptr ? kAheadNeighbourSmem : 0);
  if (!plan) return false;
  const size_t smem = static_cast<size_t>(plan->smem);
  const int rows_per_block = static_cast<int>(plan->rows_per_block), slots = plan->slots;
  const dim3 grid(static_cast<unsigned>(plan->blocks));
  const auto go = [&]<int RW, int WARPS, bool kNorm, bool kLean>() {
    const auto kernel = StagedNormMatvecKernel<P, RW, WARPS, kNorm, kLean>;
    // Per instantiation and thread (a thread drives one device): raise the dynamic shared memory cap.
    static thread_local size_t opted_in = 48 * 1024;
    if (smem > opted_in) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      opted_in = smem;
    }
    Launch(kernel, grid, dim3(WARPS * 32), smem, stream, y, x_out, xn_out, x_in, delta, norm_w, m, out, rows_per_block,
           slots, static_cast<int>(row_bytes), eps, w_offset, ready != nullptr ? ready->counter : nullptr,
           ready != nullptr ? ready->count : 0u);
  };
  const auto shape = [&]<bool kNorm, bool kLean>() {
    if (plan->rw == 2) {
      go.template operator()<2, 4, kNorm, kLean>();
    } else if (plan->warps == 4) {
      go.template operator()<1, 4, kNorm, kLean>();
    } else {
      go.template operator()<1, 2, kNorm, kLean>();
    }
  };
  // Launched ahead (`ready`): the norm form, in the lean blocks.
  if (ready != nullptr) {
    KERNEL_REQUIRE(norm);
    shape.template operator()<true, true>();
  } else if (norm) {
    shape.template operator()<true, false>();
  } else {
    shape.template operator()<false, false>();
  }
  KERNEL_CHECK();
  return true;
}

}  // namespace tandem::kernels::detail
