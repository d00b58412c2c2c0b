// The FP8 KV cache's element on the host: one e4m3fn byte (kernels/quant_weight.h has the format),
// its exact encoder, and the per-layer scales. Plain C++ (no CUDA headers): the cpu backend, the
// kernels' references and the tests share it; the kernels convert with cuda_fp8.h's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3), which this encoder matches bit for bit.
//
// A layer's K (and its V) is stored as e4m3(clamp(x / scale, -448, 448)), rounded to nearest even,
// and read back as e4m3 * scale (vLLM's k_scale / v_scale; 1 unless the checkpoint has them).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/quant_weight.h"

namespace tandem::kernels {

// A distinct type (not uint8_t) so that the overloads of the cpu ops and the kernels pick the
// fp8 path by the cache's element type, as they do for float and bf16.
struct fp8_e4m3 {
  uint8_t bits;
};
static_assert(sizeof(fp8_e4m3) == 1);

inline constexpr float kE4m3Max = 448.0f;
inline constexpr uint8_t kE4m3MaxBits = 0x7e;  // S.1111.110 = 448
inline constexpr uint8_t kE4m3NanBits = 0x7f;  // the canonical NaN __nv_cvt_float_to_fp8 writes

// Round to nearest even, saturating to +-448 (infinities too); NaN -> 0x7f. Exact: each step
// multiplies by a power of two, so only the one rounding happens.
inline uint8_t FloatToE4m3(float x) {
  if (std::isnan(x)) return kE4m3NanBits;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  // Everything from 448 up rounds to 448 or (past 464) to a value e4m3 does not have.
  if (a >= kE4m3Max) return sign | kE4m3MaxBits;
  // Below 2^-6 (the least normal) the step is the subnormals' 2^-9: codes 0..8 (8 is 2^-6).
  if (a < 0.015625f) return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): the leading bit is 2^(e - 1), e - 1 >= -6
  // 3 mantissa bits below the leading one; nearbyint in the default mode rounds ties to even.
  const int m = static_cast<int>(std::nearbyint(std::ldexp(a, 4 - e)));  // in [8, 16]
  // 16 carries into the next exponent with mantissa 0, which the addition does by itself.
  const int code = ((e - 1 + 7) << 3) + m - 8;
  return sign | static_cast<uint8_t>(code);
}

// e4m3 -> float32 by a table computed at compile time (E4m3ToFloat's ldexp per element is too slow
// for attention's inner loops): (8 + mant) * 2^(exp - 10), subnormals mant * 2^-9, 0x7f / 0xff NaN.
inline constexpr std::array<float, 256> kE4m3Table = [] {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const int exp = (b >> 3) & 0xf, mant = b & 0x7;
    float f = static_cast<float>(exp == 0 ? mant : 8 + mant);
    for (int e = exp == 0 ? -9 : exp - 10; e != 0; e += e < 0 ? 1 : -1) f = e < 0 ? f * 0.5f : f * 2.0f;
    if (exp == 0xf && mant == 0x7) f = std::numeric_limits<float>::quiet_NaN();
    t[b] = (b & 0x80) != 0 ? -f : f;
  }
  return t;
}();
inline float E4m3Decode(uint8_t bits) { return kE4m3Table[bits]; }

// One KV layer's scales: stored = x / k (or / v), read = stored * k (or * v).
struct KvScale {
  float k = 1.0f;
  float v = 1.0f;
};

}  // namespace tandem::kernels
