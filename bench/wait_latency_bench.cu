// When does a dependent kernel's griddepcontrol.wait return after the kernel before it ends, and
// does the traffic the dependent issues before its wait delay it? The engine's per-block timestamps
// (docs/bench/decode-h200.md, session 43) had the q/k/v product's wait return 3.9-4.7 us after the
// experts' down kernel's last block ended, later when more of its own loads were in flight; a chain
// of kernels without bytes costs under 1 us a step (chain_bench). This separates the two.
//
// Pairs of kernels in one CUDA graph, each launched with PDL as the engine launches its kernels:
//   P: 8 blocks of 256 threads an SM (the SM full, so no S block is resident before P's leave, as
//      the q/k/v product's are not during down), each spinning ~5 us on %globaltimer, then its
//      thread 0 stamps the block's end;
//   S: 5 blocks of 256 threads an SM (the q/k/v product's grid), each stamping its entry and, after
//      griddepcontrol.wait, the wait's return; before the wait its threads issue 1-8 16-byte loads
//      each (held in registers, used after the wait: 48 registers, 5 blocks an SM), or ask the L2
//      for 1-8 128-byte lines each (prefetch.global.L2), or nothing;
// and, for reference, the same S launched without PDL (its blocks start after P completes); and S
// launched with PDL but waiting on a flag instead of griddepcontrol.wait: each P block's thread 0,
// after its end stamp, fences and adds one to a counter; S's thread 0 spins (ld.acquire.gpu) until
// the counter holds P's grid (what a kernel chain handing work on through counters would pay).
// Rows marked "warp 0 none" leave warp 0 (the one that stamps, and polls the flag) without loads:
// whether a warp's wait returns only once its own loads have arrived (their MB column counts warp
// 0's share, which is not loaded: 7/8 of it is). The last two rows let warp 0 alone (no loads) wait
// and tell the other warps by a block barrier or a shared-memory flag: whether a warp with loads in
// flight gets past the dependency before its loads arrive that way (warp 1's column).
// Each row: the median over the pairs of (S's stamp - P's last block end) for S's first, median and
// last block, in microseconds, for the entry and for warp 0 and warp 1 getting past the dependency.
// Usage: wait_latency_bench [--pairs N (default 32; 173 MB of buffer a pair on 132 SMs)]. A
// benchmark, not a test.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/flag_handover.cuh"
#include "kernels/cuda_check.h"
#include "kernels/launch.cuh"

namespace {

using tandem::kernels::GridDepLaunchDependents;
using tandem::kernels::GridDepWait;

constexpr int kThreads = 256;
constexpr int kMaxLoads = 8;  // 16-byte loads a thread may hold across its wait (5 blocks an SM)

__device__ __forceinline__ uint64_t Now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// P: waits for the pair before it (ordering only), lets S launch, spins, stamps its block's end;
// with a flag, then counts the block done (a release: the fence, then the add).
__global__ void __launch_bounds__(kThreads) SpinKernel(uint64_t* end, unsigned spin_ns, unsigned* flag) {
  GridDepWait();
  GridDepLaunchDependents();
  const uint64_t t0 = Now();
  while (Now() - t0 < spin_ns) {
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    end[blockIdx.x] = Now();
    if (flag != nullptr) tandem::bench::CountBlockDone(flag);
  }
}

// How S's blocks learn that P is done (every form stamps warp 0's and warp 1's return):
enum class Hand {
  kWait,           // every thread griddepcontrol.wait
  kFlag,           // thread 0 spins on P's counter, then a block barrier (no griddepcontrol.wait)
  kQuietWaitBar,   // warp 0 (no loads of its own) waits, then a block barrier
  kQuietWaitSmem,  // warp 0 (no loads) waits and sets a shared flag the other warps spin on
};

// S: entry and wait-return stamps; `loads` 16-byte loads a thread before the wait (from w, the
// grid's threads interleaved; none in warp 0 for the quiet forms or with quiet0), or `lines` 128-byte
// L2 prefetches a thread. Each pair reads its own slice of w, so that no pair finds its bytes in the
// L2. With Hand::kFlag, S never calls griddepcontrol.wait: its thread 0 spins until the flag holds
// `expect`.
__global__ void __launch_bounds__(kThreads, 5) WaitKernel(uint64_t* entry, uint64_t* back, uint64_t* back1,
                                                       const uint4* w, int loads, int lines, unsigned* sink,
                                                       const unsigned* flag, unsigned expect, Hand hand,
                                                       bool quiet0) {
  const uint64_t t_in = Now();
  GridDepLaunchDependents();
  __shared__ volatile int ready;
  if (threadIdx.x == 0) ready = 0;
  __syncthreads();
  const int64_t threads = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t me = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const bool quiet = threadIdx.x < 32 && (quiet0 || hand == Hand::kQuietWaitBar || hand == Hand::kQuietWaitSmem);
  uint4 buf[kMaxLoads];
  const int mine = quiet ? 0 : loads;
#pragma unroll
  for (int k = 0; k < kMaxLoads; ++k) buf[k] = k < mine ? __ldcs(w + me + k * threads) : make_uint4(0, 0, 0, 0);
  const char* p = reinterpret_cast<const char*>(w);
  for (int k = 0; k < lines; ++k) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + (me + k * threads) * 128));
  switch (hand) {
    case Hand::kWait:
      GridDepWait();
      break;
    case Hand::kFlag:
      tandem::bench::WaitForCount(flag, expect);
      break;
    case Hand::kQuietWaitBar:
      if (threadIdx.x < 32) GridDepWait();
      __syncthreads();
      break;
    case Hand::kQuietWaitSmem:
      if (threadIdx.x < 32) {
        GridDepWait();
        __syncwarp();
        if (threadIdx.x == 0) ready = 1;
      } else {
        while (ready == 0) {
        }
      }
      break;
  }
  const uint64_t t_back = Now();
  unsigned acc = 0;
#pragma unroll
  for (int k = 0; k < kMaxLoads; ++k) acc ^= buf[k].x ^ buf[k].y ^ buf[k].z ^ buf[k].w;
  if (acc == 0x9e3779b9u) atomicAdd(sink, 1u);  // keeps the loads; the buffer never holds this
  if (threadIdx.x == 0) entry[blockIdx.x] = t_in, back[blockIdx.x] = t_back;
  if (threadIdx.x == 32) back1[blockIdx.x] = t_back;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  const char* what;
  double mb;
  bool prefetch, pdl;
  Hand hand = Hand::kWait;
  bool quiet0 = false;
};

}  // namespace

int main(int argc, char** argv) {
  int pairs = 32;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--pairs") == 0 && i + 1 < argc) {
      pairs = std::max(8, std::atoi(argv[++i]));
    } else {
      std::printf("usage: wait_latency_bench [--pairs N]\n(when a PDL wait returns after the kernel before it ends;"
                  " the header of bench/wait_latency_bench.cu says what each row is)\n");
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount, p_grid = 8 * sms, s_grid = 5 * sms;
  const int64_t s_threads = static_cast<int64_t>(s_grid) * kThreads;
  std::printf("GPU: %s, %d SMs; P %d blocks, S %d blocks of %d threads; %d pairs a row\n\n", prop.name, sms, p_grid,
              s_grid, kThreads, pairs);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int64_t slice = s_threads * 128 * 8;  // a pair's: 8 lines a thread (or 8 loads a thread)
  const int64_t w_bytes = slice * pairs;
  uint4* w = nullptr;
  uint64_t *p_end = nullptr, *s_in = nullptr, *s_back = nullptr, *s_back1 = nullptr;
  unsigned *sink = nullptr, *flags = nullptr;
  CUDA_CHECK(cudaMalloc(&w, w_bytes));
  CUDA_CHECK(cudaMalloc(&flags, sizeof(unsigned) * pairs));
  CUDA_CHECK(cudaMemsetAsync(w, 0x5a, w_bytes, s));
  CUDA_CHECK(cudaMalloc(&p_end, sizeof(uint64_t) * p_grid * pairs));
  CUDA_CHECK(cudaMalloc(&s_in, sizeof(uint64_t) * s_grid * pairs));
  CUDA_CHECK(cudaMalloc(&s_back, sizeof(uint64_t) * s_grid * pairs));
  CUDA_CHECK(cudaMalloc(&s_back1, sizeof(uint64_t) * s_grid * pairs));
  CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned)));

  const double mb_per_load = s_threads * 16 / 1e6, mb_per_line = s_threads * 128 / 1e6;
  std::vector<Row> rows = {{"nothing", 0, false, true}};
  for (int loads : {1, 2, 4, 8}) rows.push_back({"16-byte loads", loads * mb_per_load, false, true});
  for (int lines : {1, 2, 4, 8}) rows.push_back({"L2 prefetches", lines * mb_per_line, true, true});
  rows.push_back({"nothing, S launched without PDL", 0, false, false});
  rows.push_back({"nothing; a flag instead of the wait", 0, false, true, Hand::kFlag});
  for (int loads : {4, 8}) rows.push_back({"16-byte loads; a flag instead of the wait", loads * mb_per_load, false, true, Hand::kFlag});
  rows.push_back({"16-byte loads, warp 0 none", 8 * mb_per_load, false, true, Hand::kWait, true});
  rows.push_back({"16-byte loads, warp 0 none; a flag instead of the wait", 8 * mb_per_load, false, true, Hand::kFlag, true});
  rows.push_back({"16-byte loads; warp 0 (none) waits, then a block barrier", 8 * mb_per_load, false, true, Hand::kQuietWaitBar});
  rows.push_back({"16-byte loads; warp 0 (none) waits, the others spin on shared memory", 8 * mb_per_load, false, true,
                  Hand::kQuietWaitSmem});
  std::printf("| S before its wait | MB | entry: first / median / last block | warp 0 past the wait: first / median / "
              "last | warp 1: median / last |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: |\n");
  for (const Row& r : rows) {
    const int loads = r.prefetch ? 0 : static_cast<int>(r.mb / mb_per_load + 0.5);
    const int lines = r.prefetch ? static_cast<int>(r.mb / mb_per_line + 0.5) : 0;
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CUDA_CHECK(cudaMemsetAsync(flags, 0, sizeof(unsigned) * pairs, s));  // each replay from zero
    for (int i = 0; i < pairs; ++i) {
      unsigned* flag = r.hand == Hand::kFlag ? flags + i : nullptr;
      tandem::kernels::Launch(SpinKernel, dim3(p_grid), dim3(kThreads), 0, s, p_end + int64_t{i} * p_grid, 5000u,
                              flag);
      if (r.pdl) {
        tandem::kernels::Launch(WaitKernel, dim3(s_grid), dim3(kThreads), 0, s, s_in + int64_t{i} * s_grid,
                                s_back + int64_t{i} * s_grid, s_back1 + int64_t{i} * s_grid,
                                static_cast<const uint4*>(w + i * slice / 16), loads, lines, sink,
                                static_cast<const unsigned*>(flag), static_cast<unsigned>(p_grid), r.hand, r.quiet0);
      } else {
        WaitKernel<<<s_grid, kThreads, 0, s>>>(s_in + int64_t{i} * s_grid, s_back + int64_t{i} * s_grid,
                                               s_back1 + int64_t{i} * s_grid, w + i * slice / 16, loads, lines, sink,
                                               nullptr, 0u, Hand::kWait, false);
      }
    }
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm-up, then the measured replay
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    std::vector<uint64_t> pe(static_cast<size_t>(p_grid) * pairs), si(static_cast<size_t>(s_grid) * pairs),
        sb(static_cast<size_t>(s_grid) * pairs), sb1(static_cast<size_t>(s_grid) * pairs);
    CUDA_CHECK(cudaMemcpy(pe.data(), p_end, pe.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(si.data(), s_in, si.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(sb.data(), s_back, sb.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(sb1.data(), s_back1, sb1.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    std::vector<double> q[9];
    for (int i = 0; i < pairs; ++i) {
      const uint64_t ref = *std::max_element(pe.begin() + int64_t{i} * p_grid, pe.begin() + int64_t{i + 1} * p_grid);
      for (int k = 0; k < 3; ++k) {
        const std::vector<uint64_t>& v = k == 0 ? si : k == 1 ? sb : sb1;
        std::vector<double> d;
        for (int b = 0; b < s_grid; ++b) {
          d.push_back((static_cast<double>(v[int64_t{i} * s_grid + b]) - static_cast<double>(ref)) / 1e3);
        }
        std::sort(d.begin(), d.end());
        q[3 * k].push_back(d.front()), q[3 * k + 1].push_back(d[d.size() / 2]), q[3 * k + 2].push_back(d.back());
      }
    }
    std::printf("| %s | %.1f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2f / %.2f |\n", r.what, r.mb, Median(q[0]),
                Median(q[1]), Median(q[2]), Median(q[3]), Median(q[4]), Median(q[5]), Median(q[7]), Median(q[8]));
  }
  std::printf("\n(us after P's last block stamped its end; the medians over the pairs)\n");
  CUDA_CHECK(cudaFree(w));
  CUDA_CHECK(cudaFree(p_end));
  CUDA_CHECK(cudaFree(s_in));
  CUDA_CHECK(cudaFree(s_back));
  CUDA_CHECK(cudaFree(s_back1));
  CUDA_CHECK(cudaFree(sink));
  CUDA_CHECK(cudaFree(flags));
  return 0;
}
