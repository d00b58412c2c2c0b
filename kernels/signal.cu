#include "kernels/signal.h"

#include "kernels/cuda_check.h"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

__global__ void SignalDoneKernel(uint32_t* counter) {
  GridDepLaunchDependents();
  GridDepWait();  // the kernel before it has completed and its writes are visible
  __threadfence();
  atomicAdd(counter, 1u);
}

}  // namespace

void signal_done(uint32_t* counter, cudaStream_t stream) {
  KERNEL_REQUIRE(counter != nullptr);
  Launch(SignalDoneKernel, dim3(1), dim3(1), 0, stream, counter);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
