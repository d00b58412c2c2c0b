// The SwiGLU activation of a dense MLP whose gate and up projections ran as one product.
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace tandem::kernels {

// out (rows, n) = silu(gate_up[:, :n]) * gate_up[:, n:]; gate_up (rows, 2n).
void silu_mul(float* out, const float* gate_up, int64_t rows, int64_t n, cudaStream_t stream);

namespace ref {
void silu_mul(float* out, const float* gate_up, int64_t rows, int64_t n);
}  // namespace ref

}  // namespace tandem::kernels
