#include "kernels/quant_moe.h"

#include "kernels/cuda_check.h"
#include "kernels/quant_detail.h"

namespace tandem::kernels {

void moe_gate_up_quant(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T,
                       int64_t K, cudaStream_t stream, L2Prefetch next, const float* x_split, bool act_split) {
  KERNEL_REQUIRE(gate_up.rows % 2 == 0 && gate_up.cols % 16 == 0);
  KERNEL_REQUIRE(!act_split || gate_up.format == WeightFormat::kNvfp4);
  if (T == 0) return;
  switch (gate_up.format) {
    case WeightFormat::kFp8Block: detail::moe_gate_up_fp8(act, x, ids, gate_up, T, K, stream, next); return;
    case WeightFormat::kNvfp4: detail::moe_gate_up_nvfp4(act, x, ids, gate_up, T, K, stream, next, x_split, act_split); return;
    default: KERNEL_REQUIRE(false && "moe_gate_up_quant: FP8 or NVFP4 experts only (bf16: moe_gate_up)");
  }
}

void moe_down_quant(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                    int64_t T, int64_t K, cudaStream_t stream, bool follows_gate_up, bool act_split) {
  KERNEL_REQUIRE(down.cols % 16 == 0);
  KERNEL_REQUIRE(!act_split || down.format == WeightFormat::kNvfp4);
  if (T == 0) return;
  switch (down.format) {
    case WeightFormat::kFp8Block:
      detail::moe_down_fp8(out, act, ids, weights, down, T, K, stream, follows_gate_up);
      return;
    case WeightFormat::kNvfp4:
      detail::moe_down_nvfp4(out, act, ids, weights, down, T, K, stream, follows_gate_up, act_split);
      return;
    default: KERNEL_REQUIRE(false && "moe_down_quant: FP8 or NVFP4 experts only (bf16: moe_down)");
  }
}

bool moe_act_split(const QuantMatrix& gate_up, const QuantMatrix& down, int64_t T) {
  return detail::moe_act_split_nvfp4(gate_up, down, T);
}

}  // namespace tandem::kernels
