#include "kernels/rmsnorm.h"

#include <vector>

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h) over bf16 weights, accumulating in double.
namespace tandem::kernels::ref {

void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows, int64_t n,
                 float eps, float w_offset) {
  if (w_offset == 0.0f) {
    engine::cpu::add_rmsnorm<double>(out, residual, delta, w, rows, n, eps);
    return;
  }
  std::vector<float> wo(n);  // offset + w in float, as the kernel forms it
  for (int64_t i = 0; i < n; ++i) wo[i] = w_offset + Bf16ToFloat(w[i]);
  engine::cpu::add_rmsnorm<double>(out, residual, delta, wo.data(), rows, n, eps);
}

}  // namespace tandem::kernels::ref
