#include "engine/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem::engine::cpu {

float dot(const float* a, const float* b, int64_t n) {
  // Four partial sums: lets the compiler vectorise without -ffast-math.
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

void rmsnorm(float* out, const float* x, const float* w, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = out + r * n;
    float ss = dot(xr, xr, n);
    float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * scale);
  }
}

void matmul(ThreadPool& pool, float* y, const float* x, const float* w, int64_t rows, int64_t in_dim,
            int64_t out_dim) {
  auto rows_of_w = [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const float* wo = w + o * in_dim;
      for (int64_t r = 0; r < rows; ++r) y[r * out_dim + o] = dot(x + r * in_dim, wo, in_dim);
    }
  };
  // Waking threads costs microseconds: small products run on the caller.
  if (rows * in_dim * out_dim < (1 << 16)) {
    rows_of_w(0, out_dim);
  } else {
    pool.ParallelFor(out_dim, rows_of_w);
  }
}

std::vector<float> rope_inv_freq(double theta, int64_t rotary_dim) {
  std::vector<float> inv(rotary_dim / 2);
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    // As Hugging Face: the exponent 2i/d in float32, the power in float32.
    float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  return inv;
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rotary_dim, int64_t pos,
          const float* inv_freq) {
  int64_t half = rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    float angle = static_cast<float>(pos) * inv_freq[i];
    float c = std::cos(angle), s = std::sin(angle);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* xh = x + h * head_dim;
      float a = xh[i], b = xh[i + half];
      xh[i] = a * c - b * s;         // rotate_half gives -x[i + half] for the first half
      xh[i + half] = b * c + a * s;  // and x[i] for the second
    }
  }
}

void softmax(float* x, int64_t n) {
  float mx = *std::max_element(x, x + n);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

void topk(int32_t* idx, float* val, const float* probs, int64_t n, int64_t k) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  for (int64_t j = 0; j < k; ++j) {
    idx[j] = order[j];
    val[j] = probs[order[j]];
  }
}

void swiglu(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

}  // namespace tandem::engine::cpu
