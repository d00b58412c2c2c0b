// How much memory a device leaves for the KV pool, as a pure function of what the CUDA runtime and
// /proc/meminfo report (cuda::KvBlocksFromDeviceMemory reads them; the sizing policy is
// engine/batching/kv_sizing.h). Discrete GPUs and unified memory (DGX Spark's GB10) differ in what
// "in use" means.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::engine {

// What the device and the host report, for DeviceKvBudgetBytes (bytes; 0 = unknown).
struct DeviceMemoryReading {
  int64_t device_total = 0;    // cudaMemGetInfo
  int64_t device_free = 0;
  bool unified = false;        // cudaDevAttrIntegrated: device memory is the host's RAM (GB10)
  int64_t host_total = 0;      // MemTotal of /proc/meminfo
  int64_t host_available = 0;  // MemAvailable
};

// memory_fraction x total - in use, in bytes (negative when more is in use already). On a
// discrete GPU both come from cudaMemGetInfo. On unified memory cudaMemGetInfo's free leaves out
// what the kernel would reclaim (the page cache, NVIDIA's note on integrated GPUs): the
// checkpoint just read sits there, so the weights would count twice, once as the cached file and
// once as their device copy, and the pool would come out tens of GiB short. There MemTotal and
// MemAvailable are used instead (MemAvailable counts reclaimable cache as free), when readable.
double DeviceKvBudgetBytes(double memory_fraction, const DeviceMemoryReading& m);

// MemTotal and MemAvailable of a meminfo file, in bytes (0 for a value it does not hold).
struct HostMemory {
  int64_t total = 0;
  int64_t available = 0;
};
HostMemory ReadHostMemory(const std::string& meminfo_path = "/proc/meminfo");

}  // namespace tandem::engine
