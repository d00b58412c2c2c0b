// What the chain of a batch-1 decode step costs beyond its bytes, by synchronisation design, on this
// GPU: 48 layers x 8 dependent steps that read the bytes Qwen3-30B-A3B's bf16 steps read (q/k/v
// 21 MB, attention's KV at 1k 2.1 MB, o_proj 16.8 MB, router 0.5 MB, top-k and q/k norm a few KB,
// gate/up 50.3 MB, down 25.2 MB; 5.5 GB a step), each step needing the one before it finished (it
// reads the previous step's result before it may finish its own), run as
//   chain-pdl:        one kernel a step in a CUDA graph, launched with PDL, every thread's loads
//                     issued before griddepcontrol.wait (the engine's design today);
//   chain-pdl, experts' loads after the wait: gate/up and down load only after their wait, as
//                     experts chosen by the step before must;
//   chain-pdl, every load after the wait;
//   chain-plain:      the same as chain-pdl without PDL;
//   chain-flag:       launched as chain-pdl, but no kernel calls griddepcontrol.wait: each block of a
//                     step counts itself done on a counter of its own at its end (a fence, then the
//                     add) and the next step's blocks spin (ld.acquire.gpu, one thread a block) until
//                     that counter holds the step's grid: a hand-over through memory instead of the
//                     grid's completion (the counters zeroed by a memset at the graph's start);
//   persistent:       one cooperative kernel, the device's resident blocks walking the steps with a
//                     grid barrier between two steps;
//   persistent-ahead: the same, each block issuing its first loads of the next step before the
//                     barrier (what a persistent layer kernel would do with weights it knows), with
//                     every block the device holds at once, then with 1 and 2 blocks an SM;
// and the same four with no bytes at all (one 16-byte load a block), which leaves the price of a
// dependency alone. Floor: one kernel streaming the same 5.5 GB with no dependencies, and the
// device-to-device copy bandwidth (read + write), both measured in the same run.
// Usage: chain_bench [--runs N (default 15)]. Prints the median over N timed replays with min-max.
// A benchmark, not a test: nothing here checks a result beyond the kernels' CUDA errors.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/flag_handover.cuh"
#include "kernels/cuda_check.h"
#include "kernels/launch.cuh"

namespace {

namespace cg = cooperative_groups;
using tandem::kernels::GridDepLaunchDependents;
using tandem::kernels::GridDepWait;

constexpr int kThreads = 256;
constexpr int kAhead = 8;  // 16-byte loads a thread issues before its wait / barrier

struct Step {
  int64_t first, n;  // uint4s of the buffer this step reads
};

__device__ __forceinline__ unsigned Fold(const uint4& v) { return v.x ^ v.y ^ v.z ^ v.w; }

// The block's XOR, reduced and added to out once: the thread's loads folded, then a warp and block
// reduction (what a product's row reduction costs, roughly).
__device__ __forceinline__ void BlockXor(unsigned acc, unsigned* out) {
  __shared__ unsigned red[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned t = 0;
    for (int i = 0; i < kThreads / 32; ++i) t ^= red[i];
    atomicXor(out, t);
  }
  __syncthreads();
}

// Flags (chain-flag): a step's blocks count themselves done on `done`; the next step waits until the
// count reaches the step's grid.
struct Flags {
  const unsigned* prev_done = nullptr;  // null: the first step (or PDL's wait instead)
  unsigned prev_blocks = 0;
  unsigned* done = nullptr;             // null: no flags
};

// The step's dependency: griddepcontrol.wait, or (with flags) the previous step's count.
__device__ __forceinline__ void WaitForPrevious(const Flags& f) {
  if (f.done == nullptr) {
    GridDepWait();
    return;
  }
  tandem::bench::WaitForCount(f.prev_done, f.prev_blocks);  // the first step: prev_done null
}

// One step: thread i of the grid reads uint4s i, i + stride, ...; the first kAhead before the wait,
// or after it (kLate: a step whose weights depend on an earlier step, as the experts' on the top-k).
template <bool kLate>
__global__ void __launch_bounds__(kThreads) StepKernel(const uint4* w, int64_t n, const unsigned* prev, unsigned* out,
                                                       Flags f) {
  GridDepLaunchDependents();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (kLate) WaitForPrevious(f);
  uint4 buf[kAhead];
#pragma unroll
  for (int k = 0; k < kAhead; ++k) buf[k] = i + k * stride < n ? __ldcs(w + i + k * stride) : make_uint4(0, 0, 0, 0);
  if (!kLate) WaitForPrevious(f);
  unsigned acc = *prev;  // the previous step's result: the dependency
#pragma unroll
  for (int k = 0; k < kAhead; ++k) acc ^= Fold(buf[k]);
  for (i += kAhead * stride; i < n; i += stride) acc ^= Fold(__ldcs(w + i));
  BlockXor(acc, out);  // ends with a block barrier
  if (f.done != nullptr && threadIdx.x == 0) tandem::bench::CountBlockDone(f.done);
}

// Every step in one launch; out[s + 1] is step s's result, out[0] the input.
template <bool kAheadLoads>
__global__ void __launch_bounds__(kThreads) PersistentKernel(const uint4* w, const Step* steps, int n_steps,
                                                             unsigned* out) {
  const cg::grid_group grid = cg::this_grid();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t me = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  uint4 buf[kAhead];
  const auto issue = [&](const Step& st) {
#pragma unroll
    for (int k = 0; k < kAhead; ++k)
      buf[k] = me + k * stride < st.n ? __ldcs(w + st.first + me + k * stride) : make_uint4(0, 0, 0, 0);
  };
  if (kAheadLoads) issue(steps[0]);
  for (int s = 0; s < n_steps; ++s) {
    const Step st = steps[s];
    if (!kAheadLoads) issue(st);
    unsigned acc = *reinterpret_cast<volatile unsigned*>(out + s);
#pragma unroll
    for (int k = 0; k < kAhead; ++k) acc ^= Fold(buf[k]);
    for (int64_t i = me + kAhead * stride; i < st.n; i += stride) acc ^= Fold(__ldcs(w + st.first + i));
    BlockXor(acc, out + s + 1);
    if (kAheadLoads && s + 1 < n_steps) issue(steps[s + 1]);  // weights: known before the barrier
    grid.sync();
  }
}

// The floor: the same bytes, no dependencies, one launch.
__global__ void __launch_bounds__(kThreads) StreamKernel(const uint4* w, int64_t n, unsigned* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  unsigned acc = 0;
  int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(w + i), b = __ldcs(w + i + stride), c = __ldcs(w + i + 2 * stride),
                d = __ldcs(w + i + 3 * stride);
    acc ^= Fold(a) ^ Fold(b) ^ Fold(c) ^ Fold(d);
  }
  for (; i < n; i += stride) acc ^= Fold(__ldcs(w + i));
  BlockXor(acc, out);
}

// One layer's steps in MB, in the order a batch-1 layer runs them (bf16 Qwen3-30B-A3B, context 1k).
std::vector<Step> LayerSteps(int layers, bool bytes) {
  const double mb[] = {0.004, 21.0, 2.1, 16.8, 0.5, 0.004, 50.3, 25.2};  // q/k norm first, as the graph
  std::vector<Step> steps;
  int64_t at = 0;
  for (int l = 0; l < layers; ++l)
    for (double m : mb) {
      const int64_t n = bytes ? std::max<int64_t>(1, static_cast<int64_t>(m * 1e6 / 16)) : 1;
      steps.push_back({at, n});
      at += (n + 15) / 16 * 16;  // each step's slice on its own 256-byte boundary
    }
  return steps;
}

int64_t Total(const std::vector<Step>& steps) { return steps.back().first + steps.back().n; }

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Timer() { cudaEventDestroy(a), cudaEventDestroy(b); }
  template <typename F>
  std::vector<double> Run(int runs, cudaStream_t s, F&& f) {
    f();  // warm-up
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<double> us;
    for (int r = 0; r < runs; ++r) {
      CUDA_CHECK(cudaEventRecord(a, s));
      f();
      CUDA_CHECK(cudaEventRecord(b, s));
      CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      us.push_back(ms * 1000.0);
    }
    std::sort(us.begin(), us.end());
    return us;
  }
};

double Median(const std::vector<double>& v) { return v[v.size() / 2]; }

// Which steps of a chain load only after their wait.
enum class Late { kNone, kExperts, kAll };

// A graph of one StepKernel launch a step (PDL or plain; with `done`, PDL launches handing over
// through those counters, one a step, zeroed first), grids covering each step's uint4s with kAhead a
// thread (at least one block).
cudaGraphExec_t ChainGraph(const uint4* w, const std::vector<Step>& steps, unsigned* out, bool pdl, Late late,
                           unsigned* done, cudaStream_t s) {
  cudaGraph_t g;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  if (done != nullptr) CUDA_CHECK(cudaMemsetAsync(done, 0, steps.size() * sizeof(unsigned), s));
  unsigned prev_blocks = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const int64_t per_block = static_cast<int64_t>(kThreads) * kAhead;
    const unsigned blocks = static_cast<unsigned>(std::max<int64_t>(1, (steps[i].n + per_block - 1) / per_block));
    const bool is_late = late == Late::kAll || (late == Late::kExperts && i % 8 >= 6);  // gate/up, down
    const auto kernel = is_late ? StepKernel<true> : StepKernel<false>;
    Flags f;
    if (done != nullptr) f = {i > 0 ? done + i - 1 : nullptr, prev_blocks, done + i};
    prev_blocks = blocks;
    if (pdl) {
      tandem::kernels::Launch(kernel, dim3(blocks), dim3(kThreads), 0, s, w + steps[i].first, steps[i].n, out + i,
                              out + i + 1, f);
    } else {
      kernel<<<blocks, kThreads, 0, s>>>(w + steps[i].first, steps[i].n, out + i, out + i + 1, f);
    }
  }
  CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
  CUDA_CHECK(cudaGraphDestroy(g));
  return exec;
}

template <bool kAheadLoads>
void LaunchPersistent(const uint4* w, const Step* steps, int n_steps, unsigned* out, int grid, cudaStream_t s) {
  void* args[] = {const_cast<uint4**>(&w), const_cast<Step**>(&steps), &n_steps, &out};
  CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(PersistentKernel<kAheadLoads>), dim3(grid),
                                         dim3(kThreads), args, 0, s));
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 15;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(3, std::atoi(argv[++i]));
    } else {
      std::printf("usage: chain_bench [--runs N]\n(what the dependencies of a batch-1 decode step cost, by design;"
                  " the header of bench/chain_bench.cu says what each row is)\n");
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int coop = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
  if (!coop) {
    std::fprintf(stderr, "chain_bench: %s has no cooperative launch\n", prop.name);
    return 1;
  }
  constexpr int kLayers = 48;
  const std::vector<Step> with_bytes = LayerSteps(kLayers, true), no_bytes = LayerSteps(kLayers, false);
  const int n_steps = static_cast<int>(with_bytes.size());
  const int64_t n16 = Total(with_bytes);
  std::printf("GPU: %s, %d SMs, %.0f GiB; %d layers x 8 steps, %.2f GB a step\n", prop.name,
              prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, kLayers, n16 * 16 / 1e9);

  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint4* w = nullptr;
  CUDA_CHECK(cudaMalloc(&w, n16 * 16));
  CUDA_CHECK(cudaMemsetAsync(w, 0x5a, n16 * 16, s));
  unsigned *out = nullptr, *done = nullptr;
  CUDA_CHECK(cudaMalloc(&out, (n_steps + 1) * sizeof(unsigned)));
  CUDA_CHECK(cudaMalloc(&done, n_steps * sizeof(unsigned)));
  CUDA_CHECK(cudaMemsetAsync(out, 0, (n_steps + 1) * sizeof(unsigned), s));
  Step *d_bytes = nullptr, *d_none = nullptr;
  CUDA_CHECK(cudaMalloc(&d_bytes, n_steps * sizeof(Step)));
  CUDA_CHECK(cudaMalloc(&d_none, n_steps * sizeof(Step)));
  CUDA_CHECK(cudaMemcpyAsync(d_bytes, with_bytes.data(), n_steps * sizeof(Step), cudaMemcpyHostToDevice, s));
  CUDA_CHECK(cudaMemcpyAsync(d_none, no_bytes.data(), n_steps * sizeof(Step), cudaMemcpyHostToDevice, s));
  Timer timer;

  // Ceiling: device-to-device copy of 2 GiB (read + write), as cuda_decode_bench measures it.
  const int64_t copy_bytes = int64_t{2} << 30;
  void *ca = nullptr, *cb = nullptr;
  CUDA_CHECK(cudaMalloc(&ca, copy_bytes));
  CUDA_CHECK(cudaMalloc(&cb, copy_bytes));
  const auto copy = timer.Run(10, s, [&] { CUDA_CHECK(cudaMemcpyAsync(cb, ca, copy_bytes, cudaMemcpyDeviceToDevice, s)); });
  CUDA_CHECK(cudaFree(ca));
  CUDA_CHECK(cudaFree(cb));
  const double copy_gbs = 2.0 * copy_bytes / (Median(copy) * 1e3);
  std::printf("device-to-device copy (read + write), 2 GiB: median %.0f GB/s\n", copy_gbs);

  int per_sm_coop = 0, per_sm_ahead = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_coop, PersistentKernel<false>, kThreads, 0));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_ahead, PersistentKernel<true>, kThreads, 0));
  const int grid_coop = per_sm_coop * prop.multiProcessorCount, grid_ahead = per_sm_ahead * prop.multiProcessorCount;
  const int stream_grid = 4 * 8 * prop.multiProcessorCount;
  const auto floor = timer.Run(runs, s, [&] { StreamKernel<<<stream_grid, kThreads, 0, s>>>(w, n16, out); });
  CUDA_CHECK(cudaGetLastError());
  const double floor_us = Median(floor);
  std::printf("floor: the %.2f GB in one streaming kernel: %.1f us (%.0f GB/s read)\n\n", n16 * 16 / 1e9, floor_us,
              n16 * 16 / (floor_us * 1e3));

  std::printf("| design | bytes | us a step (median, min-max of %d) | vs floor | us a dependency beyond the bytes |\n", runs);
  std::printf("| --- | --- | ---: | ---: | ---: |\n");
  const auto row = [&](const char* name, bool bytes, const std::vector<double>& us) {
    const double extra = (Median(us) - (bytes ? floor_us : 0.0)) / n_steps;
    std::printf("| %s | %s | %.1f (%.1f-%.1f) | %s | %.2f |\n", name, bytes ? "5.5 GB" : "none", Median(us), us.front(),
                us.back(), bytes ? (std::to_string(static_cast<int>(100.0 * floor_us / Median(us) + 0.5)) + "%").c_str() : "-",
                extra);
  };
  for (bool bytes : {true, false}) {
    const std::vector<Step>& steps = bytes ? with_bytes : no_bytes;
    const Step* d_steps = bytes ? d_bytes : d_none;
    const struct {
      const char* name;
      bool pdl;
      Late late;
      bool flags = false;
    } chains[] = {{"chain-pdl", true, Late::kNone},
                  {"chain-pdl, experts' loads after the wait", true, Late::kExperts},
                  {"chain-pdl, every load after the wait", true, Late::kAll},
                  {"chain-plain", false, Late::kNone},
                  {"chain-flag", true, Late::kNone, true},
                  {"chain-flag, experts' loads after the wait", true, Late::kExperts, true},
                  {"chain-flag, every load after the wait", true, Late::kAll, true}};
    for (const auto& c : chains) {
      if (!bytes && c.late != Late::kNone) continue;  // one load a step: where it is issued changes nothing
      cudaGraphExec_t exec = ChainGraph(w, steps, out, c.pdl, c.late, c.flags ? done : nullptr, s);
      row(c.name, bytes, timer.Run(runs, s, [&] { CUDA_CHECK(cudaGraphLaunch(exec, s)); }));
      CUDA_CHECK(cudaGraphExecDestroy(exec));
    }
    row("persistent", bytes, timer.Run(runs, s, [&] { LaunchPersistent<false>(w, d_steps, n_steps, out, grid_coop, s); }));
    row("persistent-ahead", bytes,
        timer.Run(runs, s, [&] { LaunchPersistent<true>(w, d_steps, n_steps, out, grid_ahead, s); }));
    // Fewer blocks: a cheaper barrier, fewer loads in flight.
    for (int per_sm : {1, 2}) {
      const std::string name = "persistent-ahead, " + std::to_string(per_sm) + " block(s) an SM";
      row(name.c_str(), bytes, timer.Run(runs, s, [&] {
        LaunchPersistent<true>(w, d_steps, n_steps, out, per_sm * prop.multiProcessorCount, s);
      }));
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::printf("\npersistent grids: %d blocks (%d an SM), ahead %d (%d an SM), of %d threads\n", grid_coop, per_sm_coop,
              grid_ahead, per_sm_ahead, kThreads);
  CUDA_CHECK(cudaFree(w));
  CUDA_CHECK(cudaFree(out));
  CUDA_CHECK(cudaFree(done));
  CUDA_CHECK(cudaFree(d_bytes));
  CUDA_CHECK(cudaFree(d_none));
  return 0;
}
