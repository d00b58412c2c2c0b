// The CPU reference ops: float32, plain loops, threads over independent rows. Output arguments
// first; shapes in comments. Each op is the math of docs/model-notes.md, nothing more.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/thread_pool.h"

namespace tandem::engine::cpu {

// out = w * (x / sqrt(mean(x^2) + eps)) for each row; out (rows, n), x (rows, n), w (n). out may be x.
void rmsnorm(float* out, const float* x, const float* w, int64_t rows, int64_t n, float eps);

// y = x W^T for a batch of rows: y (rows, out_dim), x (rows, in_dim), W (out_dim, in_dim).
// Threads split the output dimension, so each weight row is read once for all rows of x.
void matmul(ThreadPool& pool, float* y, const float* x, const float* w, int64_t rows, int64_t in_dim,
            int64_t out_dim);

// inv_freq[i] = theta^(-2i / rotary_dim) for i < rotary_dim / 2.
std::vector<float> rope_inv_freq(double theta, int64_t rotary_dim);

// Rotate-half (NeoX) RoPE in place at position `pos`: dims i and i + rotary_dim/2 of each head
// form a pair; x' = x cos + rotate_half(x) sin. Dims >= rotary_dim pass through.
// x (n_heads, head_dim), inv_freq (rotary_dim / 2).
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rotary_dim, int64_t pos,
          const float* inv_freq);

// In-place softmax over n values, in float32 with the max subtracted.
void softmax(float* x, int64_t n);

// The k largest of `probs` (n): indices in descending order of value (ties: lower index first).
void topk(int32_t* idx, float* val, const float* probs, int64_t n, int64_t k);

// silu(x) = x * sigmoid(x)
inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }

// out = silu(gate) * up, elementwise over n values (the SwiGLU activation). out may alias gate.
void swiglu(float* out, const float* gate, const float* up, int64_t n);

// Dot product of two n-vectors.
float dot(const float* a, const float* b, int64_t n);

}  // namespace tandem::engine::cpu
