#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/sample.h"

namespace tandem::kernels::ref {

namespace {

uint32_t Key(float a) {
  if (a == 0.0f) return 0;  // +0 and -0 alike
  uint32_t k;
  std::memcpy(&k, &a, sizeof(k));
  return k;
}

int32_t SampleRow(const float* x, int64_t V, const SampleParams& sp) {
  float m = x[0];
  for (int64_t i = 1; i < V; ++i) m = std::max(m, x[i]);
  std::vector<uint32_t> key(V);
  std::vector<double> e(V);
  double z = 0;
  for (int64_t i = 0; i < V; ++i) {
    const float a = (m - x[i]) / sp.temperature;
    key[i] = Key(a);
    e[i] = std::exp(-static_cast<double>(a));
    z += e[i];
  }
  uint32_t k_max = 0xffffffffu;  // the threshold K: keep key <= K
  const bool use_k = sp.top_k > 0 && sp.top_k < V;
  const bool use_p = sp.top_p < 1.0f;
  if (use_k || use_p) {
    std::vector<std::pair<uint32_t, double>> sorted(V);
    for (int64_t i = 0; i < V; ++i) sorted[i] = {key[i], e[i]};
    std::sort(sorted.begin(), sorted.end());
    if (use_k) k_max = std::min(k_max, sorted[sp.top_k - 1].first);
    if (use_p) {
      // The mass of {key <= K} only grows at the end of a run of equal keys.
      const double target = static_cast<double>(sp.top_p) * z;
      double mass = 0;
      for (int64_t i = 0; i < V; ++i) {
        mass += sorted[i].second;
        if ((i + 1 == V || sorted[i + 1].first != sorted[i].first) && mass >= target) {
          k_max = std::min(k_max, sorted[i].first);
          break;
        }
      }
    }
  }
  double zs = 0;
  int64_t last = -1;
  for (int64_t i = 0; i < V; ++i) {
    if (key[i] <= k_max) {
      zs += e[i];
      if (e[i] > 0) last = i;
    }
  }
  const double target = static_cast<double>(sp.u) * zs;
  double cum = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (key[i] > k_max) continue;
    cum += e[i];
    if (cum > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(std::max<int64_t>(last, 0));
}

}  // namespace

void sample(int32_t* out, const float* logits, const SampleParams* params, int64_t R, int64_t V) {
  for (int64_t r = 0; r < R; ++r) {
    if (V <= 0 || !SampleParamsValid(params[r])) {
      std::fprintf(stderr, "ref::sample: invalid parameters for row %lld (temperature %g, top_k %d, top_p %g, u %g)\n",
                   static_cast<long long>(r), params[r].temperature, params[r].top_k, params[r].top_p, params[r].u);
      std::abort();
    }
    out[r] = SampleRow(logits + r * V, V, params[r]);
  }
}

}  // namespace tandem::kernels::ref
