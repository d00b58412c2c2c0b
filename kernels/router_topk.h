// MoE routing: softmax over the router logits, the top k experts (ties: lower index first), and
// their weights (renormalised to sum 1 when norm_topk_prob). Ids stay on the device for moe.h.
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace tandem::kernels {

// The most experts router_topk takes (Qwen3-Next has 512).
constexpr int64_t kRouterMaxExperts = 512;

// ids, weights (T, K); logits (T, E). E <= kRouterMaxExperts, K <= E.
void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize, cudaStream_t stream);

namespace ref {
void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize);
}  // namespace ref

}  // namespace tandem::kernels
