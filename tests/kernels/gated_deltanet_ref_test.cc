// The Gated DeltaNet references (kernels/gated_deltanet_ref.cc): the chunked form equals the
// token-by-token recurrence (outputs and final states) for chunk lengths around the chunk size,
// continuing states and position-0 restarts; a position-0 token ignores whatever its slot held;
// the conv's state carries a sequence across steps exactly. Runs everywhere.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gated_deltanet.h"
#include "tests/kernels/gated_deltanet_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeltaNetStepData;
using testing::DeltaNetTestWeights;
using testing::SeqSpec;
using testing::Uniform;

double RelError(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

// The prepared inputs of the recurrence (qkv, g, beta) for a step, from random projections.
struct Prepared {
  std::vector<float> qkv, g, beta;
};

Prepared Prepare(const DeltaNetLayout& L, const DeltaNetStepData& step, int64_t slots, uint64_t seed) {
  const DeltaNetTestWeights w(L, seed);
  std::vector<float> proj = Uniform(step.T() * L.proj_row(), 1.0f, seed + 10);
  std::vector<float> conv_states = Uniform(slots * L.conv_state_size(), 1.0f, seed + 11);
  Prepared p{std::vector<float>(step.T() * L.conv_dim()), std::vector<float>(step.T() * L.n_v),
             std::vector<float>(step.T() * L.n_v)};
  ref::gated_deltanet_prepare(p.qkv.data(), p.g.data(), p.beta.data(), conv_states.data(), proj.data(),
                              w.conv_w.data(), w.A_log.data(), w.dt_bias.data(), step.host(), L);
  return p;
}

TEST(gated_deltanet_ref, ChunkedEqualsRecurrence) {
  // The real head sizes at a few heads, and a small odd shape (dk != dv, 3 value heads per key head).
  for (const DeltaNetLayout& L : {DeltaNetLayout{2, 4, 128, 128, 4}, DeltaNetLayout{1, 3, 24, 40, 3}}) {
    // Lengths around the chunk sizes, some continuing their slot's state, some from position 0.
    const DeltaNetStepData step({{1, 5, 3}, {7, 0, 0}, {64, 9, 5}, {65, 0, 1}, {200, 3, 2}, {33, 0, 4}});
    const int64_t slots = 6, T = step.T(), V = L.value_dim();
    const Prepared p = Prepare(L, step, slots, 7 + L.dk);
    const std::vector<float> states0 = Uniform(slots * L.state_size(), 0.5f, 99);
    std::vector<float> o_rec(T * V), s_rec = states0;
    ref::gated_deltanet_recurrent(o_rec.data(), s_rec.data(), p.qkv.data(), p.g.data(), p.beta.data(), step.host(),
                                  L);
    for (int64_t chunk : {64, 32, 5}) {
      std::vector<float> o_chunk(T * V, NAN), s_chunk = states0;
      ref::gated_deltanet_chunked(o_chunk.data(), s_chunk.data(), p.qkv.data(), p.g.data(), p.beta.data(),
                                  step.host(), L, chunk);
      // The recurrence rounds its state to float every token, the chunked form once per call.
      EXPECT_LT(RelError(o_chunk, o_rec), 1e-5) << "dk " << L.dk << " chunk " << chunk;
      EXPECT_LT(RelError(s_chunk, s_rec), 1e-5) << "dk " << L.dk << " chunk " << chunk;
    }
  }
}

// One token at position 0: S = k (beta v)^T whatever the slot held, so o = beta (q.k) v; the
// slot's state afterwards is that outer product in both forms.
TEST(gated_deltanet_ref, PositionZeroIgnoresTheSlot) {
  const DeltaNetLayout L{1, 2, 4, 3, 2};
  const DeltaNetStepData step({{1, 0, 1}});
  const Prepared p = Prepare(L, step, 2, 5);
  for (bool chunked : {false, true}) {
    std::vector<float> o(L.value_dim()), states(2 * L.state_size(), 123.0f);
    if (chunked) {
      ref::gated_deltanet_chunked(o.data(), states.data(), p.qkv.data(), p.g.data(), p.beta.data(), step.host(), L,
                                  64);
    } else {
      ref::gated_deltanet_recurrent(o.data(), states.data(), p.qkv.data(), p.g.data(), p.beta.data(), step.host(), L);
    }
    const float* q = p.qkv.data();
    const float* k = q + L.key_dim();
    const float* v = k + L.key_dim();
    double qk = 0;
    for (int a = 0; a < L.dk; ++a) qk += double(q[a]) * k[a];
    for (int h = 0; h < L.n_v; ++h) {
      for (int j = 0; j < L.dv; ++j) {
        EXPECT_NEAR(o[h * L.dv + j], p.beta[h] * qk * v[h * L.dv + j], 1e-6) << h << " " << j;
        for (int a = 0; a < L.dk; ++a) {
          EXPECT_NEAR(states[L.state_size() + (h * L.dk + a) * L.dv + j], k[a] * p.beta[h] * v[h * L.dv + j], 1e-6);
        }
      }
    }
    for (int64_t i = 0; i < L.state_size(); ++i) ASSERT_EQ(states[i], 123.0f) << "slot 0 untouched";
  }
}

// Ten tokens in one step equal 3 then 7 in two steps (the second continuing the conv state), bit
// for bit; the conv states after both agree too.
TEST(gated_deltanet_ref, ConvStateCarriesAcrossSteps) {
  const DeltaNetLayout L{2, 4, 8, 6, 4};
  const DeltaNetTestWeights w(L, 3);
  const std::vector<float> proj = Uniform(10 * L.proj_row(), 1.0f, 4);
  auto run = [&](const DeltaNetStepData& step, const float* proj_rows, std::vector<float>& conv) {
    std::vector<float> qkv(step.T() * L.conv_dim()), g(step.T() * L.n_v), beta(step.T() * L.n_v);
    ref::gated_deltanet_prepare(qkv.data(), g.data(), beta.data(), conv.data(), proj_rows, w.conv_w.data(),
                                w.A_log.data(), w.dt_bias.data(), step.host(), L);
    qkv.insert(qkv.end(), g.begin(), g.end());
    qkv.insert(qkv.end(), beta.begin(), beta.end());
    return qkv;
  };
  std::vector<float> conv_one = Uniform(2 * L.conv_state_size(), 1.0f, 5), conv_two = conv_one;
  const std::vector<float> one = run(DeltaNetStepData({{10, 0, 1}}), proj.data(), conv_one);
  const std::vector<float> first = run(DeltaNetStepData({{3, 0, 1}}), proj.data(), conv_two);
  const std::vector<float> second = run(DeltaNetStepData({{7, 3, 1}}), proj.data() + 3 * L.proj_row(), conv_two);
  EXPECT_EQ(conv_one, conv_two);
  // qkv rows of tokens 0..2 then 3..9 (g and beta follow the rows in `one`).
  const int64_t C = L.conv_dim();
  for (int64_t i = 0; i < 3 * C; ++i) ASSERT_EQ(one[i], first[i]) << i;
  for (int64_t i = 0; i < 7 * C; ++i) ASSERT_EQ(one[3 * C + i], second[i]) << i;
}

}  // namespace
}  // namespace tandem::kernels
