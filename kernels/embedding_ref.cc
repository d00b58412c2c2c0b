#include "kernels/embedding.h"

#include "engine/cpu/ops.h"

// The references are the cpu backend's ops (engine/cpu/ops.h) over bf16 weights, accumulating in double.
namespace tandem::kernels::ref {

void embedding(float* out, const int32_t* ids, const bf16_bits* table, int64_t T, int64_t H) {
  engine::cpu::embedding(out, ids, table, T, H);
}

}  // namespace tandem::kernels::ref
