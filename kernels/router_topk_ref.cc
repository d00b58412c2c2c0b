#include "kernels/router_topk.h"

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h), computing in double.
namespace tandem::kernels::ref {

void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize) {
  engine::cpu::router_topk<double>(ids, weights, logits, T, E, K, renormalize);
}

}  // namespace tandem::kernels::ref
