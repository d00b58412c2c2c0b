#include <vector>

#include "engine/cpu/ops.h"
#include "kernels/quant_matmul.h"
#include "kernels/quant_moe.h"

// The references dequantize the whole stack to float32 (DequantAt, exact) and run the cpu backend's
// ops (engine/cpu/ops.h) on it, accumulating in double.
namespace tandem::kernels::ref {

namespace {

std::vector<float> Dequantized(const QuantMatrix& W) {
  std::vector<float> w(static_cast<size_t>(W.count * W.rows * W.cols));
  for (int64_t e = 0; e < W.count; ++e) {
    for (int64_t r = 0; r < W.rows; ++r) {
      for (int64_t c = 0; c < W.cols; ++c) w[(e * W.rows + r) * W.cols + c] = DequantAt(W, e, r, c);
    }
  }
  return w;
}

}  // namespace

void matmul_quant(float* y, const float* x, const QuantMatrix& W, int64_t T) {
  const std::vector<float> w = Dequantized(W);
  engine::cpu::matmul<double>(nullptr, y, x, w.data(), T, W.cols, W.rows);
}

void dequantize_bf16(bf16_bits* dst, const QuantMatrix& W, bf16_bits* lo) {
  const std::vector<float> w = Dequantized(W);
  for (size_t i = 0; i < w.size(); ++i) {
    dst[i] = FloatToBf16(w[i]);
    if (lo != nullptr) lo[i] = FloatToBf16(w[i] - Bf16ToFloat(dst[i]));
  }
}

void moe_gate_up_quant(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T,
                       int64_t K) {
  const std::vector<float> w = Dequantized(gate_up);
  engine::cpu::moe_gate_up<double>(nullptr, act, x, ids, w.data(), T, K, gate_up.cols, gate_up.rows / 2);
}

void moe_down_quant(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                    int64_t T, int64_t K) {
  const std::vector<float> w = Dequantized(down);
  engine::cpu::moe_down<double>(nullptr, out, act, ids, weights, w.data(), T, K, down.rows, down.cols);
}

}  // namespace tandem::kernels::ref
