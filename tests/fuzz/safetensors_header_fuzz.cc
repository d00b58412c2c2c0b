// Fuzz target: the safetensors header parser (untrusted bytes from a downloaded file).
// Input layout: the first 8 bytes (little-endian, when present) give the data-section size so
// the range checks are exercised too; the rest is the header JSON.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "engine/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t data_bytes = 0;
  if (size >= 8) {
    for (int i = 7; i >= 0; --i) data_bytes = (data_bytes << 8) | data[i];
    data += 8;
    size -= 8;
  }
  auto tensors = tandem::engine::ParseSafetensorsHeader(
      std::string_view(reinterpret_cast<const char*>(data), size), data_bytes);
  if (tensors.ok()) {
    // Every accepted entry must be self-consistent: that is the parser's contract.
    for (const auto& t : *tensors) {
      if (t.data_end > data_bytes || t.data_end < t.data_begin ||
          t.nbytes() != static_cast<uint64_t>(t.numel()) * tandem::engine::DTypeSize(t.dtype)) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
