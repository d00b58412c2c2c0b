#include "kernels/launch.cuh"

namespace tandem::kernels {

bool PdlEnabled() {
  static const bool enabled = [] {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    return major >= 9;
  }();
  return enabled;
}

int CurrentDeviceAttribute(cudaDeviceAttr attr) {
  int device = 0, value = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

int SmCount() {
  static const int n = CurrentDeviceAttribute(cudaDevAttrMultiProcessorCount);
  return n;
}

namespace {
thread_local LaunchCarveout current_carveout = LaunchCarveout::kDefault;
}  // namespace

LaunchCarveout CurrentLaunchCarveout() { return current_carveout; }

ScopedLaunchCarveout::ScopedLaunchCarveout(LaunchCarveout c) : previous_(current_carveout) { current_carveout = c; }

ScopedLaunchCarveout::~ScopedLaunchCarveout() { current_carveout = previous_; }

int MaxSmemPerBlock() {
  static const int n = CurrentDeviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  return n;
}

}  // namespace tandem::kernels
