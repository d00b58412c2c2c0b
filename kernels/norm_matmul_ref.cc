#include <vector>

#include "kernels/matmul.h"
#include "kernels/norm_matmul.h"
#include "kernels/rmsnorm.h"

namespace tandem::kernels::ref {

void add_rmsnorm_matmul(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                        const bf16_bits* norm_w, const bf16_bits* w, int64_t T, int64_t in, int64_t out, float eps,
                        float w_offset) {
  std::vector<float> r(x_in, x_in + T * in), xn(T * in);
  add_rmsnorm(xn.data(), r.data(), delta, norm_w, T, in, eps, w_offset);
  matmul_bf16(y, xn.data(), w, T, in, out);
  std::copy(r.begin(), r.end(), x_out);
  if (xn_out != nullptr) std::copy(xn.begin(), xn.end(), xn_out);
}

}  // namespace tandem::kernels::ref
