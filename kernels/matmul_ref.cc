#include "kernels/matmul.h"

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h) over bf16 weights, accumulating in double.
namespace tandem::kernels::ref {

void matmul_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out) {
  engine::cpu::matmul<double>(nullptr, y, x, w, T, in, out);
}

}  // namespace tandem::kernels::ref
