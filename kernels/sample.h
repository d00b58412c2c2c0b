// Sampling on the device: one token per row of logits with temperature, top-k and top-p, from a
// uniform number the caller draws on the host (seeds and determinism stay there). Not used by the
// engine yet: serving samples on the host (engine/serve/sampler.h).
//
// Exact semantics, identical in the CPU reference and the CUDA kernel, for a row x (V floats):
//   m   = max_i x_i
//   a_i = (m - x_i) / temperature              float32 arithmetic, so bit-identical on both sides;
//                                              a_i >= 0 (0 at the max, +inf for a -inf logit)
//   p_i = exp(-a_i) / sum_j exp(-a_j)          = softmax(x / temperature)_i
// p is a decreasing function of a, so thresholds are taken on a (exact) rather than on p (whose
// exp and sum round differently on the two sides): key_i = the bit pattern of a_i as uint32
// (non-negative floats order like their bits; +0 for a zero a_i), smaller key = more likely.
//   K_k = the k-th smallest key (the k-th largest p), when 0 < top_k < V
//   K_p = the smallest key K with  sum_{key_j <= K} p_j >= top_p  (the nucleus: every token at
//         least as likely as the least likely token of the smallest most-likely-first prefix whose
//         mass reaches top_p), when top_p < 1. Computed over the whole distribution, not after top_k.
//   K   = min of those that apply (tau = max(tau_k, tau_p) in p), else every token is kept
//   S   = { i : key_i <= K }                     ties at the threshold are all kept
//   out = the first i in S, in vocabulary order, with  sum_{j in S, j <= i} p_j > u * sum_{j in S} p_j;
//         the last index of S with p > 0 when rounding leaves none. (In the reference the first
//         rule always finds one; a token of p = 0, a -inf logit, is never chosen on either side.)
// Only the sums differ between the two sides (the reference sums in double, the kernel in float
// with a block-wide tree), so a top_p boundary or a u within ~1e-6 relative of a CDF step may pick
// a neighbouring token; away from those every choice is identical. top_k = 1 is argmax when the
// maximum is unique (equal maxima are all kept, and u picks among them). Rows need at least one
// finite logit and no NaN (else the result is some index in [0, V)).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/stream.h"

namespace tandem::kernels {

struct SampleParams {
  float temperature = 1.0f;  // > 0 (greedy decoding calls argmax instead)
  int32_t top_k = 0;         // 0 or >= V: off
  float top_p = 1.0f;        // in (0, 1]; 1: off
  float u = 0.0f;            // uniform in [0, 1), drawn by the caller
};

// The launcher and the reference reject (abort on) anything else; temperature 0 included.
inline bool SampleParamsValid(const SampleParams& p) {
  return p.temperature > 0.0f && std::isfinite(p.temperature) && p.top_k >= 0 && p.top_p > 0.0f &&
         p.top_p <= 1.0f && p.u >= 0.0f && p.u < 1.0f;
}

// out (R) = one token per row of logits (R, V); params: R entries in HOST memory (read by the
// launcher, passed to the kernel by value, so nothing is copied to the device for them).
void sample(int32_t* out, const float* logits, const SampleParams* params, int64_t R, int64_t V,
            cudaStream_t stream);

namespace ref {
void sample(int32_t* out, const float* logits, const SampleParams* params, int64_t R, int64_t V);
}  // namespace ref

}  // namespace tandem::kernels
