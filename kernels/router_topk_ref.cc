#include "kernels/router_topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace tandem::kernels::ref {

void router_topk(int32_t* ids, float* weights, const float* logits, int64_t T, int64_t E, int64_t K,
                 bool renormalize) {
  std::vector<double> p(E);
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    const double mx = *std::max_element(l, l + E);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(l[e] - mx);
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    double ksum = 0;
    for (int64_t k = 0; k < K; ++k) ksum += p[order[k]];
    for (int64_t k = 0; k < K; ++k) {
      ids[t * K + k] = order[k];
      weights[t * K + k] = static_cast<float>(renormalize ? p[order[k]] / ksum : p[order[k]]);
    }
  }
}

}  // namespace tandem::kernels::ref
