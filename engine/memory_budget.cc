#include "engine/memory_budget.h"

#include <fstream>

namespace tandem::engine {

double DeviceKvBudgetBytes(double memory_fraction, const DeviceMemoryReading& m) {
  if (m.unified && m.host_total > 0 && m.host_available > 0) {
    const double in_use = static_cast<double>(m.host_total - m.host_available);
    return memory_fraction * static_cast<double>(m.host_total) - in_use;
  }
  const double in_use = static_cast<double>(m.device_total - m.device_free);
  return memory_fraction * static_cast<double>(m.device_total) - in_use;
}

HostMemory ReadHostMemory(const std::string& meminfo_path) {
  HostMemory out;
  std::ifstream in(meminfo_path);
  std::string key, unit;
  int64_t kb = 0;
  while (in >> key >> kb) {
    std::getline(in, unit);  // " kB"
    if (key == "MemTotal:") out.total = kb * 1024;
    if (key == "MemAvailable:") out.available = kb * 1024;
  }
  return out;
}

}  // namespace tandem::engine
