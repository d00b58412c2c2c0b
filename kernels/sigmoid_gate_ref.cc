#include "kernels/sigmoid_gate.h"

#include "engine/cpu/linear_attention.h"
#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/linear_attention.h, ops.h), in double.
namespace tandem::kernels::ref {

void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride) {
  engine::cpu::sigmoid_gate<double>(att, gates, T, n, gate_stride);
}

}  // namespace tandem::kernels::ref
