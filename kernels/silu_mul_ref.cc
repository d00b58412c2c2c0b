#include "kernels/silu_mul.h"

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h), computing in double.
namespace tandem::kernels::ref {

void silu_mul(float* out, const float* gate_up, int64_t rows, int64_t n) {
  engine::cpu::silu_mul<double>(out, gate_up, rows, n);
}

}  // namespace tandem::kernels::ref
