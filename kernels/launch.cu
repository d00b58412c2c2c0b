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
thread_local int current_decode_buffers = 2;
}  // namespace

LaunchCarveout CurrentLaunchCarveout() { return current_carveout; }

int CurrentDecodeBuffers() { return current_decode_buffers; }

ScopedLaunchCarveout::ScopedLaunchCarveout(LaunchCarveout c, int decode_buffers)
    : previous_(current_carveout), previous_buffers_(current_decode_buffers) {
  current_carveout = c;
  current_decode_buffers = decode_buffers;
}

ScopedLaunchCarveout::~ScopedLaunchCarveout() {
  current_carveout = previous_;
  current_decode_buffers = previous_buffers_;
}

int MaxSmemPerBlock() {
  static const int n = CurrentDeviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  return n;
}

}  // namespace tandem::kernels
