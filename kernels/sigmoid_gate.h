// Gated attention's output gate of the hybrid models (Qwen3-Next, Qwen3.5-MoE; docs/model-notes.md):
// each head's output times sigmoid of its gate rows, before o_proj. (The shared expert's gate is
// router_topk's: the shared expert runs as one more expert.)
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// att (T, n) *= sigmoid(gates[t * gate_stride + i]), in place.
void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride, cudaStream_t stream);

namespace ref {
void sigmoid_gate(float* att, const float* gates, int64_t T, int64_t n, int64_t gate_stride);
}  // namespace ref

}  // namespace tandem::kernels
