#include "kernels/moe.h"

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h) over bf16 weights, accumulating in
// double (the products' outputs, as the kernels', in float32).
namespace tandem::kernels::ref {

void moe_gate_up(float* act, const float* x, const int32_t* ids, const bf16_bits* gate_up, int64_t T, int64_t K,
                 int64_t H, int64_t I) {
  engine::cpu::moe_gate_up<double>(nullptr, act, x, ids, gate_up, T, K, H, I);
}

void moe_down(float* out, const float* act, const int32_t* ids, const float* weights, const bf16_bits* down,
              int64_t T, int64_t K, int64_t H, int64_t I) {
  engine::cpu::moe_down<double>(nullptr, out, act, ids, weights, down, T, K, H, I);
}

}  // namespace tandem::kernels::ref
