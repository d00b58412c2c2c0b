#include "kernels/router_topk.h"

#include <vector>

#include "engine/cpu/linear_attention.h"
#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h), computing in double.
namespace tandem::kernels::ref {

void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize, bool shared_expert) {
  if (!shared_expert) {
    engine::cpu::router_topk<double>(ids, weights, logits, T, E, K, renormalize);
    return;
  }
  // Per token: the routed experts from the first E logits, then the shared expert's gate.
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits + t * (E + 1);
    engine::cpu::router_topk<double>(ids + t * (K + 1), weights + t * (K + 1), row, 1, E, K, renormalize);
    ids[t * (K + 1) + K] = static_cast<int32_t>(E);
    weights[t * (K + 1) + K] = static_cast<float>(engine::cpu::sigmoid(static_cast<double>(row[E])));
  }
}

}  // namespace tandem::kernels::ref
