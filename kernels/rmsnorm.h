// RMSNorm fused with the residual add that precedes it in every decoder layer.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// residual (rows, n) += delta (when delta is not null); then
// out (rows, n) = (w_offset + w) * residual / sqrt(mean(residual^2) + eps). w (n) bf16. out must
// not alias. w_offset 1 is the hybrid models' zero-centred norm ((1 + w), the 1 added in float32
// so a stored w near 0 keeps its precision); 0 the plain one. w is read before the kernel waits
// for the previous kernel of the stream (kernels/launch.cuh): weights, not a kernel's output.
void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows,
                 int64_t n, float eps, cudaStream_t stream, float w_offset = 0.0f);

namespace ref {
void add_rmsnorm(float* out, float* residual, const float* delta, const bf16_bits* w, int64_t rows,
                 int64_t n, float eps, float w_offset = 0.0f);
}  // namespace ref

}  // namespace tandem::kernels
