#include "kernels/launch.cuh"

#include <cstdlib>
#include <cstring>

namespace tandem::kernels {

bool PdlEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("TANDEM_PDL");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    return major >= 9;
  }();
  return enabled;
}

}  // namespace tandem::kernels
