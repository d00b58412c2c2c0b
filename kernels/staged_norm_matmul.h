// The residual add + RMSNorm + product of one token with the product's weights staged in shared
// memory before the kernel waits for its predecessor (kernels/staged_matvec.cuh has the design):
// bf16, block-scaled FP8 and NVFP4 weights alike. A decode option (ModelLoadOptions::
// cuda_staged_matvec) for its A/B against the register-held forms (norm_matmul.h for bf16; a
// separate add_rmsnorm and the split product for the quantized formats).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/quant_weight.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// As add_rmsnorm_matmul (kernels/norm_matmul.h) at T = 1 for W (W.count == 1, W.cols = the row's
// width) in any WeightFormat (kBf16: W.data holds the bf16 matrix): r = x_in + delta (delta may
// be null), xn = (w_offset + norm_w) * r / sqrt(mean(r^2) + eps), y (W.rows) = xn W^T; r to x_out
// and, when not null, xn to xn_out. x_out must not alias x_in or delta; pointers 16-byte aligned.
// Returns false, launching nothing, where the staged form does not apply: this thread's launches
// do not ask for the decode-attention split (kernels/carveout.h: the staged blocks take their
// shared memory from it), the layout has no staged form (FP8 per-element scales, NVFP4 rows not a
// multiple of 256 columns), or a slot of rows does not fit. The caller then takes the other forms.
//
// With `ready` the kernel is launched ahead of its input, on another stream than the kernels that
// write x_in and delta: it copies its weights, then waits until *ready->counter reaches
// ready->count (kernels/signal.h signal_done raises it after the kernels that write them) before
// it reads them, in blocks small enough (32 registers a thread on sm_90) to sit beside the kernels
// it overlaps. The caller orders the counter's reset before the launch and joins the stream after.
struct StagedReady {
  const uint32_t* counter = nullptr;
  uint32_t count = 0;
};
bool add_rmsnorm_matmul_staged(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                               const bf16_bits* norm_w, const QuantMatrix& W, float eps, cudaStream_t stream,
                               float w_offset = 0.0f, const StagedReady* ready = nullptr);

// The staged product alone: y (W.rows) = x W^T for one token (x float32, cols values, already
// normed by the caller), the weights staged as above; false where add_rmsnorm_matmul_staged would
// be. (The A/B's second form: the separate norm kernel kept, only the product staged.)
bool matmul_staged(float* y, const float* x, const QuantMatrix& W, cudaStream_t stream);

}  // namespace tandem::kernels
