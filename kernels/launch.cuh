// Programmatic dependent launch (PDL, sm_90+): a kernel launched with Launch() below may begin
// while the kernel before it in the stream is still finishing, so the launch latency and the
// first weight loads of a decode step's ~10 kernels per layer overlap the tail of the previous one.
//
// The contract every kernel launched this way keeps:
//   - call GridDepLaunchDependents() (it lets the NEXT kernel start launching) at its start, or right
//     after its GridDepWait() where the next kernel's early loads would otherwise be in flight while
//     this kernel waits on its own reads, which are the step's critical path (attention_decode,
//     the experts' down kernels and router_topk: docs/bench/decode-h200.md, session 50). Where a
//     kernel's own reads are one short round trip and the next kernel's early loads are the chain's
//     next bytes, the start wins (add_rmsnorm and the q/k norm lost the later trigger: sessions
//     50-51), and
//   - call GridDepWait() before reading anything an earlier kernel of the stream wrote and before
//     writing anything an earlier kernel may still read. Only data that no kernel writes (weights,
//     the step's metadata copied before the launch) may be read before it.
// GridDepWait() returns once the previous kernel has completed and its writes are visible; since
// that kernel waited for its own predecessor the same way, the order is transitive.
// PDL won its A/B (docs/bench/decode-h200.md: 5.12 vs 5.51 ms per batch-1 step), so it is always
// on where the device has it; before sm_90 launches are plain and the two device calls no-ops.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/carveout.h"
#include "kernels/cuda_check.h"

namespace tandem::kernels {

__device__ __forceinline__ void GridDepWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void GridDepLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches use PDL: the current device is sm_90+ (asked once per process).
bool PdlEnabled();

// An attribute of the current device (CUDA errors abort, as every launcher's checks do).
int CurrentDeviceAttribute(cudaDeviceAttr attr);

// The current device's multiprocessor count (cudaDevAttrMultiProcessorCount, asked once per
// process): what the launchers size their grids and shapes by, never a constant (the H200 has 132,
// the GB10 48).
int SmCount();

// The most shared memory one block of the current device may opt in to
// (cudaDevAttrMaxSharedMemoryPerBlockOptin, asked once per process: 227 KB on the H200, 99 KB on
// the GB10).
int MaxSmemPerBlock();

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when PdlEnabled(), this
// thread's LaunchCarveout, and in thread block clusters of `cluster` blocks when that is more than
// one (sm_90 on: the H200 and the GB10; more than 8 blocks a cluster only where the kernel allows
// non-portable sizes).
template <typename... Params, typename... Args>
void LaunchClusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, dim3 cluster,
                    Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr[3];
  unsigned n = 0;
  if (CurrentLaunchCarveout() == LaunchCarveout::kFitDecodeAttention) {
    attr[n].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
    attr[n++].val.sharedMemCarveout = DecodeAttentionCarveoutPercent(CurrentDecodeBuffers());
  }
  if (PdlEnabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n++].val.clusterDim.z = cluster.z;
  }
  config.attrs = n > 0 ? attr : nullptr;
  config.numAttrs = n;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when PdlEnabled() and this
// thread's LaunchCarveout.
template <typename... Params, typename... Args>
void Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  LaunchClusters(kernel, grid, block, smem, stream, dim3(1, 1, 1), std::forward<Args>(args)...);
}

}  // namespace tandem::kernels
