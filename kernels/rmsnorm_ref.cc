#include "kernels/rmsnorm.h"

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h) over bf16 weights, accumulating in double.
namespace tandem::kernels::ref {

void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows, int64_t n,
                 float eps) {
  engine::cpu::add_rmsnorm<double>(out, residual, delta, w, rows, n, eps);
}

}  // namespace tandem::kernels::ref
