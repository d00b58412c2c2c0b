// Inputs of the Gated DeltaNet kernel tests (reference and GPU): a step's sequences (chunk length,
// first position, state slot) as the metadata the kernels read, and random projections, weights
// and states at a layout's sizes. Plain C++ (no CUDA), so the reference test runs everywhere.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/gated_deltanet.h"

namespace tandem::kernels::testing {

struct SeqSpec {
  int32_t len = 0, start_pos = 0, slot = 0;
};

// The metadata of one step: per token its position, per sequence its slot and first token.
struct DeltaNetStepData {
  std::vector<int32_t> pos, state_slots, seq_starts;

  explicit DeltaNetStepData(const std::vector<SeqSpec>& seqs) {
    seq_starts.push_back(0);
    for (const SeqSpec& s : seqs) {
      for (int32_t i = 0; i < s.len; ++i) pos.push_back(s.start_pos + i);
      state_slots.push_back(s.slot);
      seq_starts.push_back(static_cast<int32_t>(pos.size()));
    }
  }
  int64_t T() const { return static_cast<int64_t>(pos.size()); }
  int64_t S() const { return static_cast<int64_t>(state_slots.size()); }
  // Host pointers (the references); the GPU tests point the same struct at device copies.
  DeltaNetStep host() const { return {pos.data(), state_slots.data(), seq_starts.data(), T(), S()}; }
};

// Uniform values in [-scale, scale], a fixed seed per call site so a failure reproduces.
inline std::vector<float> Uniform(size_t n, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<bf16_bits> UniformBf16(size_t n, float scale, uint64_t seed) {
  std::vector<bf16_bits> v;
  for (float x : Uniform(n, scale, seed)) v.push_back(FloatToBf16(x));
  return v;
}

// A layer's small weights at plausible magnitudes: conv taps ~0.5, A_log in [0, 2] (decay rates
// exp(A_log) of 1..7, as trained models have), dt_bias ~1, the norm weight around 1.
struct DeltaNetTestWeights {
  std::vector<bf16_bits> conv_w, A_log, dt_bias, norm_w;
  DeltaNetTestWeights(const DeltaNetLayout& L, uint64_t seed)
      : conv_w(UniformBf16(L.conv_dim() * L.conv_kernel, 0.5f, seed)),
        A_log(UniformBf16(L.n_v, 1.0f, seed + 1)),
        dt_bias(UniformBf16(L.n_v, 1.0f, seed + 2)),
        norm_w(UniformBf16(L.dv, 0.5f, seed + 3)) {
    for (auto& a : A_log) a = FloatToBf16(Bf16ToFloat(a) + 1.0f);
    for (auto& w : norm_w) w = FloatToBf16(Bf16ToFloat(w) + 1.0f);
  }
};

}  // namespace tandem::kernels::testing
