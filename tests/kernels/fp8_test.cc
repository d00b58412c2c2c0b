// The FP8 KV cache's host encoder (kernels/fp8.h): every one of the 256 e4m3 codes decodes and
// encodes back to itself, values between two codes round to the nearer (ties to the even code),
// and what e4m3 cannot hold saturates to +-448 (NaN to the canonical 0x7f), as the GPU's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) does (kv_fp8_cuda_test compares the two).
#include "kernels/fp8.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace tandem::kernels {
namespace {

bool IsNanCode(int code) { return (code & 0x7f) == 0x7f; }

TEST(fp8, EveryCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    const float f = E4m3ToFloat(static_cast<uint8_t>(code));
    if (IsNanCode(code)) {
      EXPECT_TRUE(std::isnan(f)) << code;
      EXPECT_TRUE(std::isnan(E4m3Decode(static_cast<uint8_t>(code)))) << code;
      EXPECT_EQ(FloatToE4m3(f), kE4m3NanBits) << code;
      continue;
    }
    EXPECT_EQ(E4m3Decode(static_cast<uint8_t>(code)), f) << code;
    EXPECT_EQ(FloatToE4m3(f), code) << code << " = " << f;
  }
}

TEST(fp8, RoundsToNearestEvenBetweenCodes) {
  // Every pair of neighbouring finite codes of one sign: the midpoint goes to the even code, a bit
  // either side of it to the nearer one.
  for (int code = 0; code < 0x7e; ++code) {
    const float lo = E4m3ToFloat(static_cast<uint8_t>(code)), hi = E4m3ToFloat(static_cast<uint8_t>(code + 1));
    const float mid = (lo + hi) / 2;  // exact: both have 4 significant bits
    const int even = code % 2 == 0 ? code : code + 1;
    EXPECT_EQ(FloatToE4m3(mid), even) << lo << " .. " << hi;
    EXPECT_EQ(FloatToE4m3(-mid), 0x80 | even) << lo << " .. " << hi;
    EXPECT_EQ(FloatToE4m3(std::nextafter(mid, lo)), code) << lo << " .. " << hi;
    EXPECT_EQ(FloatToE4m3(std::nextafter(mid, hi)), code + 1) << lo << " .. " << hi;
  }
}

TEST(fp8, SaturatesAndKeepsSigns) {
  EXPECT_EQ(FloatToE4m3(448.0f), 0x7e);
  EXPECT_EQ(FloatToE4m3(463.9f), 0x7e);
  EXPECT_EQ(FloatToE4m3(1e6f), 0x7e);
  EXPECT_EQ(FloatToE4m3(-1e6f), 0xfe);
  EXPECT_EQ(FloatToE4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(FloatToE4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(FloatToE4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(FloatToE4m3(0.0f), 0x00);
  EXPECT_EQ(FloatToE4m3(-0.0f), 0x80);
  // Below half the least subnormal (2^-9): zero; just above it: the least subnormal.
  EXPECT_EQ(FloatToE4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(FloatToE4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(FloatToE4m3(1.0f), 0x38);
  EXPECT_EQ(FloatToE4m3(-2.5f), 0xc2);
}

}  // namespace
}  // namespace tandem::kernels
