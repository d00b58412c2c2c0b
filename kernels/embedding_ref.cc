#include "kernels/embedding.h"

namespace tandem::kernels::ref {

void embedding(float* out, const int32_t* ids, const bf16_bits* table, int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < H; ++i) out[t * H + i] = Bf16ToFloat(table[ids[t] * H + i]);
  }
}

}  // namespace tandem::kernels::ref
