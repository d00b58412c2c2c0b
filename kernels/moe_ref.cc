#include "kernels/moe.h"

#include <cmath>

namespace tandem::kernels::ref {

namespace {
double Dot(const bf16_bits* w, const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(Bf16ToFloat(w[i])) * x[i];
  return s;
}
}  // namespace

void moe_gate_up(float* act, const float* x, const int32_t* ids, const bf16_bits* gate_up, int64_t T,
                 int64_t K, int64_t H, int64_t I) {
  for (int64_t p = 0; p < T * K; ++p) {
    const bf16_bits* we = gate_up + static_cast<int64_t>(ids[p]) * 2 * I * H;
    const float* xt = x + (p / K) * H;
    for (int64_t i = 0; i < I; ++i) {
      const double g = Dot(we + i * H, xt, H), u = Dot(we + (I + i) * H, xt, H);
      act[p * I + i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  }
}

void moe_down(float* out, const float* act, const int32_t* ids, const float* weights, const bf16_bits* down,
              int64_t T, int64_t K, int64_t H, int64_t I) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t p = t * K + k;
        s += weights[p] * Dot(down + (static_cast<int64_t>(ids[p]) * H + h) * I, act + p * I, I);
      }
      out[t * H + h] = static_cast<float>(s);
    }
  }
}

}  // namespace tandem::kernels::ref
