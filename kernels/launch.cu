#include "kernels/launch.cuh"

#include <cstdlib>
#include <cstring>

namespace tandem::kernels {

bool EnvEquals(const char* name, const char* value) {
  const char* env = std::getenv(name);
  return env != nullptr && std::strcmp(env, value) == 0;
}

bool PdlEnabled() {
  static const bool enabled = [] {
    if (EnvEquals("TANDEM_PDL", "0")) return false;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    return major >= 9;
  }();
  return enabled;
}

}  // namespace tandem::kernels
