#include "kernels/matmul.h"

namespace tandem::kernels::ref {

void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out) {
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += static_cast<double>(x[t * in + i]) * Bf16ToFloat(w[o * in + i]);
      y[t * out + o] = static_cast<float>(s);
    }
  }
}

}  // namespace tandem::kernels::ref
