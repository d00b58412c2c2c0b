// MoE routing: softmax over the router logits, the top k experts (ties: lower index first), and
// their weights (renormalised to sum 1 when norm_topk_prob). Ids stay on the device for moe.h.
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace tandem::kernels {

// The most experts router_topk takes (Qwen3-Next has 512).
constexpr int64_t kRouterMaxExperts = 512;

// ids, weights (T, K); logits (T, E). E <= kRouterMaxExperts, K <= E.
//
// With shared_expert (the hybrid models' shared expert run as one more expert of the MoE kernels):
// logits (T, E + 1), the last column the shared_expert_gate's logit; ids, weights (T, K + 1), the
// routed K as above (renormalised among themselves) and then expert E with weight sigmoid(that logit).
void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize, cudaStream_t stream, bool shared_expert = false);

namespace ref {
void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize, bool shared_expert = false);
}  // namespace ref

}  // namespace tandem::kernels
