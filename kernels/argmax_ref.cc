#include "kernels/argmax.h"

namespace tandem::kernels::ref {

void argmax(int32_t* out, const float* x, int64_t R, int64_t V) {
  for (int64_t r = 0; r < R; ++r) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v) {
      if (x[r * V + v] > x[r * V + best]) best = v;
    }
    out[r] = static_cast<int32_t>(best);
  }
}

}  // namespace tandem::kernels::ref
