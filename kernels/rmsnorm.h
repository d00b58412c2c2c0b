// RMSNorm fused with the residual add that precedes it in every decoder layer.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// residual (rows, n) += delta (when delta is not null); then
// out (rows, n) = w * residual / sqrt(mean(residual^2) + eps). w (n) bf16. out must not alias.
void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows,
                 int64_t n, float eps, cudaStream_t stream);

namespace ref {
void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows,
                 int64_t n, float eps);
}  // namespace ref

}  // namespace tandem::kernels
