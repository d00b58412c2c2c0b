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

void CheckParams(const SampleParams& p, int64_t V, int64_t r) {
  if (V > 0 && SampleParamsValid(p)) return;
  std::fprintf(stderr, "ref::sample: invalid parameters for row %lld (temperature %g, top_k %d, top_p %g, u %g)\n",
               static_cast<long long>(r), p.temperature, p.top_k, p.top_p, p.u);
  std::abort();
}

// One row's keys, unnormalised probabilities e_i = exp(-a_i) (double) and the threshold K of
// sample.h: S = {i : key[i] <= k_max}.
struct KeptRow {
  std::vector<uint32_t> key;
  std::vector<double> e;
  uint32_t k_max = 0xffffffffu;
};

KeptRow Keep(const float* x, int64_t V, const SampleParams& sp) {
  KeptRow row;
  float m = x[0];
  for (int64_t i = 1; i < V; ++i) m = std::max(m, x[i]);
  row.key.resize(V);
  row.e.resize(V);
  for (int64_t i = 0; i < V; ++i) {
    const float a = (m - x[i]) / sp.temperature;
    row.key[i] = Key(a);
    row.e[i] = std::exp(-static_cast<double>(a));
  }
  const bool use_k = sp.top_k > 0 && sp.top_k < V;
  const bool use_p = sp.top_p < 1.0f;
  if (!use_k && !use_p) return row;
  std::vector<std::pair<uint32_t, double>> sorted(V);
  for (int64_t i = 0; i < V; ++i) sorted[i] = {row.key[i], row.e[i]};
  std::sort(sorted.begin(), sorted.end());
  if (use_k) row.k_max = sorted[sp.top_k - 1].first;
  if (use_p) {
    // The nucleus within {key <= K_k}, a prefix of `sorted`. Its mass is summed in the order of
    // the loop below, so the loop reaches the target at the latest on the prefix's last entry.
    int64_t n = 0;
    double mass_k = 0;
    while (n < V && sorted[n].first <= row.k_max) mass_k += sorted[n++].second;
    const double target = static_cast<double>(sp.top_p) * mass_k;
    double mass = 0;
    for (int64_t i = 0; i < n; ++i) {
      mass += sorted[i].second;
      // The mass of {key <= K} only grows at the end of a run of equal keys.
      if ((i + 1 == n || sorted[i + 1].first != sorted[i].first) && mass >= target) {
        row.k_max = sorted[i].first;
        break;
      }
    }
  }
  return row;
}

int32_t SampleRow(const float* x, int64_t V, const SampleParams& sp) {
  const KeptRow row = Keep(x, V, sp);
  double zs = 0;
  int64_t last = -1;
  for (int64_t i = 0; i < V; ++i) {
    if (row.key[i] <= row.k_max) {
      zs += row.e[i];
      if (row.e[i] > 0) last = i;
    }
  }
  const double target = static_cast<double>(sp.u) * zs;
  double cum = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (row.key[i] > row.k_max) continue;
    cum += row.e[i];
    if (cum > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(std::max<int64_t>(last, 0));
}

}  // namespace

void sample(int32_t* out, const float* logits, const SampleParams* params, int64_t R, int64_t V) {
  for (int64_t r = 0; r < R; ++r) {
    CheckParams(params[r], V, r);
    out[r] = SampleRow(logits + r * V, V, params[r]);
  }
}

std::vector<std::pair<int32_t, double>> sample_distribution(const float* logits, int64_t V,
                                                            const SampleParams& params) {
  CheckParams(params, V, 0);
  const KeptRow row = Keep(logits, V, params);
  std::vector<std::pair<int32_t, double>> dist;
  double zs = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (row.key[i] <= row.k_max && row.e[i] > 0) {
      dist.emplace_back(static_cast<int32_t>(i), row.e[i]);
      zs += row.e[i];
    }
  }
  for (auto& d : dist) d.second /= zs;
  return dist;
}

}  // namespace tandem::kernels::ref
