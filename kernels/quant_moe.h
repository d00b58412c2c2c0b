// The routed-expert kernels of kernels/moe.h over a quantized expert stack (kernels/quant_weight.h,
// W.count = the experts, the shared expert appended as one more when the model has it): the same
// pairs, ids read on the device, the same outputs, the weights dequantized in registers.
//   gate_up: W.rows = 2 I (gate_proj rows, then up_proj rows), W.cols = H
//   down:    W.rows = H, W.cols = I
#pragma once

#include <cstdint>

#include "kernels/l2_prefetch.h"
#include "kernels/quant_weight.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// act (T*K, I) = silu(x_t W_gate[e]^T) * (x_t W_up[e]^T), e = ids[p], t = p / K. x (T, H). next: as
// moe_gate_up's (moe.h). x_split (one token; null: none): the same x in split order
// (kernels/split_order.h, e.g. add_rmsnorm_matmul's xn_split), which NVFP4's one-token kernel reads
// instead of x (contiguous reads; the same results); FP8 reads x. act_split (with x_split, where
// moe_act_split says so): each act row is stored in split order instead, for moe_down_quant with
// act_split.
void moe_gate_up_quant(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T,
                       int64_t K, cudaStream_t stream, L2Prefetch next = {}, const float* x_split = nullptr,
                       bool act_split = false);
// out (T, H) = sum_k weights[t*K+k] * act[t*K+k] W_down[ids[t*K+k]]^T (plain store). follows_gate_up
// as in moe_down. act_split: act's rows are in split order (moe_gate_up_quant's act_split); the same
// results.
void moe_down_quant(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                    int64_t T, int64_t K, cudaStream_t stream, bool follows_gate_up = false, bool act_split = false);
// Whether a T-token step over these stacks may pass act_split to both (NVFP4's one-token kernels).
bool moe_act_split(const QuantMatrix& gate_up, const QuantMatrix& down, int64_t T);

namespace ref {
void moe_gate_up_quant(float* act, const float* x, const int32_t* ids, const QuantMatrix& gate_up, int64_t T,
                       int64_t K);
void moe_down_quant(float* out, const float* act, const int32_t* ids, const float* weights, const QuantMatrix& down,
                    int64_t T, int64_t K);
}  // namespace ref

}  // namespace tandem::kernels
