// bf16 on the host: the storage type of weights and KV shared by kernels and their CPU references.
// Headers use uint16_t so that plain C++ (the references, the tests) needs no CUDA headers; the
// kernels reinterpret the same bits as __nv_bfloat16.
#pragma once

#include <cstdint>
#include <cstring>

namespace tandem::kernels {

using bf16_bits = uint16_t;

inline float Bf16ToFloat(bf16_bits b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even, as __float2bfloat16 does (NaN stays NaN).
inline bf16_bits FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>(u >> 16);
}

}  // namespace tandem::kernels
