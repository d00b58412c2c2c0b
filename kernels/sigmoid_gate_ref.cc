#include "kernels/sigmoid_gate.h"

#include "engine/cpu/linear_attention.h"
#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/linear_attention.h, ops.h), in double.
namespace tandem::kernels::ref {

void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride) {
  engine::cpu::sigmoid_gate<double>(att, gates, T, n, gate_stride);
}

void sigmoid_gated_add(float* out, const float* y, const float* x, const bf16_bits* w_gate, int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const double g = engine::cpu::sigmoid(engine::cpu::dot<double>(x + t * H, w_gate, H));
    for (int64_t i = 0; i < H; ++i) out[t * H + i] = static_cast<float>(out[t * H + i] + g * y[t * H + i]);
  }
}

}  // namespace tandem::kernels::ref
