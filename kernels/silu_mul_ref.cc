#include "kernels/silu_mul.h"

#include <cmath>

namespace tandem::kernels::ref {

void silu_mul(float* out, const float* gate_up, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate_up[r * 2 * n + i], u = gate_up[r * 2 * n + n + i];
      out[r * n + i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  }
}

}  // namespace tandem::kernels::ref
