// The sigmoid gates of the hybrid models (Qwen3-Next, Qwen3.5-MoE; docs/model-notes.md): gated
// attention's output gate (each head's output times sigmoid of its gate rows, before o_proj) and
// the shared expert's scalar gate per token (its output times sigmoid(x . shared_expert_gate),
// added to the routed experts' sum).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// att (T, n) *= sigmoid(gates[t * gate_stride + i]), in place.
void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride, cudaStream_t stream);

// out (T, H) += sigmoid(x[t] . w_gate) * y[t], per token t; x, y (T, H), w_gate (H) bf16. The dot
// product runs in float32 over the whole row (one block per token). out must not alias x or y.
void sigmoid_gated_add(float* out, const float* y, const float* x, const bf16_bits* w_gate, int64_t T, int64_t H,
                       cudaStream_t stream);

namespace ref {
void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride);
void sigmoid_gated_add(float* out, const float* y, const float* x, const bf16_bits* w_gate, int64_t T, int64_t H);
}  // namespace ref

}  // namespace tandem::kernels
