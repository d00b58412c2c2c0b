// Sampling on the device: one token per row of logits with temperature, top-k and top-p, from a
// uniform number the caller draws on the host (seeds and determinism stay there). Not used by the
// engine yet: serving samples on the host (engine/batching/sampler.h).
//
// Exact semantics, identical in the CPU reference and the CUDA kernel, for a row x (V floats):
//   m   = max_i x_i
//   a_i = (m - x_i) / temperature              float32 arithmetic, so bit-identical on both sides;
//                                              a_i >= 0 (0 at the max, +inf for a -inf logit)
//   p_i = exp(-a_i) / sum_j exp(-a_j)          = softmax(x / temperature)_i
// p is a decreasing function of a, so thresholds are taken on a (exact) rather than on p (whose
// exp and sum round differently on the two sides): key_i = the bit pattern of a_i as uint32
// (non-negative floats order like their bits; +0 for a zero a_i), smaller key = more likely.
//   K_k = the k-th smallest key (the k-th largest p) when 0 < top_k < V, else 0xffffffff
//   K_p = the smallest key K with  sum_{key_j <= K} p_j >= top_p * sum_{key_j <= K_k} p_j  when
//         top_p < 1 (the nucleus of the top_k set: every token at least as likely as the least
//         likely token of the smallest most-likely-first prefix of that set whose mass,
//         renormalised over the set, reaches top_p; K_p <= K_k), else K_k
//   S   = { i : key_i <= K_p }                   ties at either threshold are all kept
//   out = the first i in S, in vocabulary order, with  sum_{j in S, j <= i} p_j > u * sum_{j in S} p_j;
//         the last index of S with p > 0 when rounding leaves none. (In the reference the first
//         rule always finds one; a token of p = 0, a -inf logit, is never chosen on either side.)
// Only the sums differ between the two sides (the reference sums in double, the kernel in float
// with a block-wide tree), so a top_p boundary or a u within ~1e-6 relative of a CDF step may pick
// a neighbouring token; away from those every choice is identical. Rows need at least one finite
// logit and no NaN (else the result is some index in [0, V)).
//
// Against the serving sampler (engine/batching/sampler.h, SamplingDistribution: top_k, then top_p
// over the top_k set, renormalised) S is the same set, with the same probabilities up to the
// rounding of a_i in float (relative ~a_i * 1e-7) and of the sums at a top_p boundary, except on
// exact ties of keys, which the two break differently: the host orders by (logit, lower id) and
// cuts inside a run of equal keys, the threshold here keeps the whole run. So S is larger where
//   - the top_k-th and the next most likely token have equal keys: S keeps every token of that key,
//     and the mass top_p is taken of includes them all (so the nucleus may end elsewhere too);
//   - the host's nucleus ends on a token whose key equals the next token's: S keeps the whole run;
//   - top_k = 1 with equal maxima: the host is greedy (the lowest id), S keeps every maximum.
// Equal keys are equal logits, or logits so close that (m - x) / temperature rounds them together
// in float; with all keys distinct (or distinct at the thresholds) the two sets are identical.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

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
// What ref::sample draws from for one row (V logits): (token, probability) for every token of S
// with p > 0, in vocabulary order; the probability is its step of the CDF above, p_i / sum_{S} p_j,
// in double. Tests compare it with the serving sampler's distribution.
std::vector<std::pair<int32_t, double>> sample_distribution(const float* logits, int64_t V,
                                                            const SampleParams& params);
}  // namespace ref

}  // namespace tandem::kernels
