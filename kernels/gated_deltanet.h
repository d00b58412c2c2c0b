// The Gated DeltaNet of the hybrid models (Qwen3-Next, Qwen3.5-MoE; docs/model-notes.md) between
// its fused input projection and out_proj: the causal conv1d + SiLU with the gates, the gated
// delta-rule recurrence (token by token, or the chunked WY form for long prefill chunks) and the
// gated output norm. The math is engine/cpu/linear_attention.h's; the references reuse it.
//
// Every sequence of a step owns a slot of two pools: its conv state (slots, conv_dim, K-1) and its
// recurrent state (slots, n_v, dk, dv), both float32. A sequence whose chunk starts at position 0
// starts from zeros (whatever the slot holds); any other chunk continues the slot's state. All
// per-step inputs are read on the device (the step's metadata, engine/step.h StepMeta), so a
// decode step is graph-capturable.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

// Callable from kernels too (the structs are passed by value to the kernels).
#ifndef TANDEM_HOST_DEVICE
#ifdef __CUDACC__
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif
#endif

namespace tandem::kernels {

// One rank's DeltaNet heads. Value head h reads key head h / (n_v / n_k).
struct DeltaNetLayout {
  int64_t n_k = 0, n_v = 0, dk = 0, dv = 0, conv_kernel = 0;
  TANDEM_HOST_DEVICE int64_t key_dim() const { return n_k * dk; }
  TANDEM_HOST_DEVICE int64_t value_dim() const { return n_v * dv; }
  TANDEM_HOST_DEVICE int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // q | k | v
  // A row of the fused input projection: qkv (conv_dim) | z (value_dim) | b (n_v) | a (n_v).
  TANDEM_HOST_DEVICE int64_t proj_row() const { return conv_dim() + value_dim() + 2 * n_v; }
  TANDEM_HOST_DEVICE int64_t conv_state_size() const { return conv_dim() * (conv_kernel - 1); }  // one slot
  TANDEM_HOST_DEVICE int64_t state_size() const { return n_v * dk * dv; }                       // one slot
};

// The number of values of each of one rank's DeltaNet weights (`hidden`: the model's), in the order
// both backends' mixers read them; their loaders check the weights against it.
struct DeltaNetWeightSize {
  const char* name;
  int64_t size;
};
inline std::array<DeltaNetWeightSize, 9> DeltaNetWeightSizes(const DeltaNetLayout& L, int64_t hidden) {
  return {{{"in_qkv", L.conv_dim() * hidden},
           {"in_z", L.value_dim() * hidden},
           {"in_b", L.n_v * hidden},
           {"in_a", L.n_v * hidden},
           {"conv", L.conv_dim() * L.conv_kernel},
           {"A_log", L.n_v},
           {"dt_bias", L.n_v},
           {"norm", L.dv},
           {"out", hidden * L.value_dim()}}};
}

// The step's metadata as the DeltaNet reads it (device pointers into StepMeta's array, or host
// pointers for the references). Tokens of a sequence are consecutive and in position order.
struct DeltaNetStep {
  const int32_t* pos = nullptr;          // (T) each token's position
  const int32_t* state_slots = nullptr;  // (S) each sequence's slot in the pools
  const int32_t* seq_starts = nullptr;   // (S + 1) sequence s has tokens [seq_starts[s], seq_starts[s + 1])
  int64_t T = 0, S = 0;
};

// What the kernels handle (the launchers check it; the mixer refuses other shapes at load).
inline bool DeltaNetSupported(const DeltaNetLayout& L) {
  return L.n_k > 0 && L.n_v % L.n_k == 0 && L.dk > 0 && L.dk <= 256 && L.dv > 0 && L.dv <= 256 &&
         L.conv_kernel >= 1 && L.conv_kernel <= 8;
}

// Per token t of the step: qkv[t] (conv_dim) = silu(causal conv1d of proj[t]'s qkv part over the
// sequence's earlier inputs (those of this step, then the conv state)); then q and k L2-normed per
// key head (eps 1e-6) and q scaled by 1/sqrt(dk); per value head beta = sigmoid(b) and
// g = -exp(A_log) softplus(a + dt_bias) into g, beta (T, n_v). Then each sequence's conv state
// keeps its last K-1 inputs. proj (T, proj_row) is not changed; conv_w (conv_dim, K), A_log,
// dt_bias (n_v) bf16.
void gated_deltanet_prepare(float* qkv, float* g, float* beta, float* conv_states, const float* proj,
                            const bf16_bits* conv_w, const bf16_bits* A_log, const bf16_bits* dt_bias,
                            DeltaNetStep st, DeltaNetLayout L, cudaStream_t stream);

// The gated delta rule, each sequence's tokens in order from its slot's state (written back):
// o (T, n_v, dv) = S_t^T q_t after token t. qkv, g, beta as gated_deltanet_prepare leaves them.
// The decode form (one block per sequence, value head and slice of dv); right for any chunk.
void gated_deltanet_recurrent(float* o, float* states, const float* qkv, const float* g, const float* beta,
                              DeltaNetStep st, DeltaNetLayout L, cudaStream_t stream);

// The same result by chunks of kDeltaNetChunk tokens (the WY form of flash-linear-attention's
// chunk_gated_delta_rule): the long prefill form. Needs dk <= 128 (shared memory).
inline constexpr int64_t kDeltaNetChunk = 32;
inline bool DeltaNetChunkedSupported(const DeltaNetLayout& L) { return DeltaNetSupported(L) && L.dk <= 128; }
void gated_deltanet_chunked(float* o, float* states, const float* qkv, const float* g, const float* beta,
                            DeltaNetStep st, DeltaNetLayout L, cudaStream_t stream);

// The output norm per token and value head: out (T, n_v, dv) = (w * rmsnorm(o)) * silu(z), z read
// from row t of `z` at stride z_stride (proj + conv_dim, proj_row). w (dv) bf16. out may be o.
void gated_deltanet_norm(float* out, const float* o, const bf16_bits* w, const float* z, int64_t z_stride,
                         int64_t T, DeltaNetLayout L, float eps, cudaStream_t stream);

namespace ref {
// engine/cpu/linear_attention.h's templates in double, token by token.
void gated_deltanet_prepare(float* qkv, float* g, float* beta, float* conv_states, const float* proj,
                            const bf16_bits* conv_w, const bf16_bits* A_log, const bf16_bits* dt_bias,
                            DeltaNetStep st, DeltaNetLayout L);
void gated_deltanet_recurrent(float* o, float* states, const float* qkv, const float* g, const float* beta,
                              DeltaNetStep st, DeltaNetLayout L);
// The chunked form in double with chunks of `chunk` tokens (the test shows it equals the recurrence).
void gated_deltanet_chunked(float* o, float* states, const float* qkv, const float* g, const float* beta,
                            DeltaNetStep st, DeltaNetLayout L, int64_t chunk);
void gated_deltanet_norm(float* out, const float* o, const bf16_bits* w, const float* z, int64_t z_stride,
                         int64_t T, DeltaNetLayout L, float eps);
}  // namespace ref

}  // namespace tandem::kernels
