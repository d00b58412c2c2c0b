// Helpers of the kernels' reference tests on hand-computed values (kernels_ref_test,
// hybrid_kernels_ref_test): exact bf16 weights, value-by-value checks, a normed row to compare with.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/bf16.h"

namespace tandem::kernels::testing {

inline std::vector<bf16_bits> Bf16(const std::vector<float>& v) {
  std::vector<bf16_bits> out;
  for (float f : v) out.push_back(FloatToBf16(f));
  return out;
}

// Each value of `got` within 1e-6 of `want` (relative to max(1, |want|)).
inline void ExpectValues(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

// x / sqrt(mean(x^2)) for x = (1, 2, 3, 4): mean 7.5.
inline const std::vector<double> kNormed1234 = {0.36514837167011072, 0.73029674334022144, 1.0954451150103322,
                                                1.4605934866804429};

}  // namespace tandem::kernels::testing
