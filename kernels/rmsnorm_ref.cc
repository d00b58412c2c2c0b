#include "kernels/rmsnorm.h"

#include <cmath>

namespace tandem::kernels::ref {

void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows,
                 int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* x = residual + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (delta != nullptr) x[i] += delta[r * n + i];
      ss += static_cast<double>(x[i]) * x[i];
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = Bf16ToFloat(w[i]) * (x[i] * scale);
  }
}

}  // namespace tandem::kernels::ref
