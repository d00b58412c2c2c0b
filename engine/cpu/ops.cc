#include "engine/cpu/ops.h"

namespace tandem::engine::cpu {

std::vector<float> rope_inv_freq(double theta, int64_t rotary_dim) {
  std::vector<float> inv(rotary_dim / 2);
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    // As Hugging Face: the exponent 2i/d in float32, the power in float32.
    float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  return inv;
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rotary_dim, int64_t pos, const float* inv_freq) {
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

ExpertRuns::ExpertRuns(const int32_t* ids, int64_t n) : pairs(n) {
  std::iota(pairs.begin(), pairs.end(), int64_t{0});
  std::stable_sort(pairs.begin(), pairs.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || ids[pairs[i]] != ids[pairs[i - 1]]) starts.emplace_back(ids[pairs[i]], i);
  }
}

}  // namespace tandem::engine::cpu
