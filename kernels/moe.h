// Routed-expert computation with the expert ids read on the device (from router_topk.h), so a
// layer never waits for the host. Experts are stored back to back:
//   gate_up (E, 2*I, H): rows [0, I) of expert e are gate_proj, rows [I, 2I) up_proj;
//   down    (E, H, I).
// Pair p = t*K + k is token t's k-th expert.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/l2_prefetch.h"
#include "kernels/matmul.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// act (T*K, I) = silu(x_t W_gate[e]^T) * (x_t W_up[e]^T), e = ids[p], t = p / K. x (T, H).
// From gemm_min_tokens tokens on (matmul.h kGemmMinTokens; gemm.h UseGemmPath) the grouped GEMM
// of moe_gemm.h, with x rounded to bf16.
// next: weights of a later kernel the decode kernel asks the L2 for before its wait (l2_prefetch.h).
void moe_gate_up(float* act, const float* x, const int32_t* ids, const bf16_bits* gate_up, int64_t T,
                 int64_t K, int64_t H, int64_t I, cudaStream_t stream, int64_t gemm_min_tokens = kGemmMinTokens,
                 L2Prefetch next = {});

// out (T, H) = sum_k weights[t*K+k] * act[t*K+k] W_down[ids[t*K+k]]^T (plain store, no accumulate).
// follows_gate_up: this call comes right after moe_gate_up with the same ids on the same stream
// (nothing launched between): the decode kernel then loads its weights while moe_gate_up runs.
// gemm_min_tokens as for moe_gate_up (pass the same).
void moe_down(float* out, const float* act, const int32_t* ids, const float* weights, const bf16_bits* down,
              int64_t T, int64_t K, int64_t H, int64_t I, cudaStream_t stream, bool follows_gate_up = false,
              int64_t gemm_min_tokens = kGemmMinTokens);

namespace ref {
void moe_gate_up(float* act, const float* x, const int32_t* ids, const bf16_bits* gate_up, int64_t T,
                 int64_t K, int64_t H, int64_t I);
void moe_down(float* out, const float* act, const int32_t* ids, const float* weights, const bf16_bits* down,
              int64_t T, int64_t K, int64_t H, int64_t I);
}  // namespace ref

}  // namespace tandem::kernels
