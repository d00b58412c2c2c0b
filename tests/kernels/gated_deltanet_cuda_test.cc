// The Gated DeltaNet kernels (kernels/gated_deltanet.h) against their references on fresh random
// inputs, outputs poisoned before each launch: a decode batch (distinct slots continuing their
// states), a mixed step (prefill chunks of 1, 7, 64, 65 and 200 tokens with decodes, some from
// position 0 over slots holding garbage), at the real head shape (dk = dv = 128, n_k 16, n_v 32)
// and a small odd one (dk 24, dv 40, 3 value heads per key head, conv width 3). Both the
// token-by-token and the chunked recurrence are compared with the token-by-token reference.
// Bound: ||out - ref|| / ||ref|| < 1e-4, tighter than METHOD.md's usual 1e-3: float32 against
// double over the same inputs gives about 1e-7 here (4e-7 after 200 tokens of the chunked form, in
// a CPU emulation of these kernels), while a 10% error in the chunked form's (I - A)^-1 shows as
// only ~1e-3 on random inputs (random keys are nearly orthogonal at dk 128). A wrong index or a
// missing reset is O(1).
// A chained check: a 200-token prefill in one chunk (chunked form) then decodes equals the same
// tokens one step at a time (outputs and both state pools). Skips where no GPU is present.
#include <string>
#include <vector>

#include "kernels/gated_deltanet.h"
#include "tests/kernels/gated_deltanet_test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeltaNetStepData;
using testing::DeltaNetTestWeights;
using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomFloats;
using testing::SeqSpec;

constexpr double kBound = 1e-4;

// The step's metadata on the device.
struct DeviceStep {
  DeviceBuffer<int32_t> pos, slots, starts;
  DeltaNetStep view;
  explicit DeviceStep(const DeltaNetStepData& s)
      : pos(s.pos), slots(s.state_slots), starts(s.seq_starts),
        view{pos.get(), slots.get(), starts.get(), s.T(), s.S()} {}
};

const DeltaNetLayout kReal{16, 32, 128, 128, 4};
const DeltaNetLayout kOdd{3, 9, 24, 40, 3};
constexpr int64_t kSlots = 8;

// One token per sequence (the prepare kernel then shifts the conv states itself), one of them at
// position 0 (a one-token prompt: its slot restarts from zeros).
std::vector<SeqSpec> DecodeBatch() { return {{1, 5, 3}, {1, 17, 0}, {1, 2, 6}, {1, 40, 1}, {1, 9, 7}, {1, 0, 4}}; }
std::vector<SeqSpec> MixedStep() {
  return {{200, 0, 2}, {1, 37, 5}, {65, 0, 0}, {7, 12, 3}, {64, 3, 7}, {1, 0, 4}, {1, 99, 6}, {1, 0, 1}};
}

std::string Tag(const std::string& what, const DeltaNetLayout& L, int64_t T) {
  return what + " " + testing::Shape({L.n_k, L.n_v, L.dk, L.dv, L.conv_kernel}) + " T=" + std::to_string(T);
}

TEST(gated_deltanet_cuda, Prepare) {
  SKIP_WITHOUT_GPU();
  for (const DeltaNetLayout& L : {kReal, kOdd}) {
    for (const auto& seqs : {DecodeBatch(), MixedStep()}) {
      const DeltaNetStepData step(seqs);
      const int64_t T = step.T();
      const DeltaNetTestWeights w(L, 1);
      const auto proj = RandomFloats(T * L.proj_row());
      auto conv = RandomFloats(kSlots * L.conv_state_size());  // garbage where a sequence starts at 0
      DeviceStep ds(step);
      DeviceBuffer<float> d_proj(proj), d_conv(conv), d_qkv(T * L.conv_dim()), d_g(T * L.n_v), d_beta(T * L.n_v);
      DeviceBuffer<bf16_bits> d_cw(w.conv_w), d_alog(w.A_log), d_dtb(w.dt_bias);
      d_qkv.Poison(), d_g.Poison(), d_beta.Poison();
      gated_deltanet_prepare(d_qkv.get(), d_g.get(), d_beta.get(), d_conv.get(), d_proj.get(), d_cw.get(),
                             d_alog.get(), d_dtb.get(), ds.view, L, nullptr);
      std::vector<float> qkv(T * L.conv_dim()), g(T * L.n_v), beta(T * L.n_v);
      ref::gated_deltanet_prepare(qkv.data(), g.data(), beta.data(), conv.data(), proj.data(), w.conv_w.data(),
                                  w.A_log.data(), w.dt_bias.data(), step.host(), L);
      ExpectClose(Tag("prepare qkv", L, T), d_qkv.Download(), qkv, kBound);
      ExpectClose(Tag("prepare g", L, T), d_g.Download(), g, kBound);
      ExpectClose(Tag("prepare beta", L, T), d_beta.Download(), beta, kBound);
      ExpectClose(Tag("prepare conv states", L, T), d_conv.Download(), conv, kBound);
    }
  }
}

// qkv, g, beta for a step from the reference preparation (realistic normed q, k and gates).
struct Prepared {
  std::vector<float> qkv, g, beta;
};
Prepared RefPrepare(const DeltaNetLayout& L, const DeltaNetStepData& step) {
  const DeltaNetTestWeights w(L, 2);
  const auto proj = RandomFloats(step.T() * L.proj_row());
  auto conv = RandomFloats(kSlots * L.conv_state_size());
  Prepared p{std::vector<float>(step.T() * L.conv_dim()), std::vector<float>(step.T() * L.n_v),
             std::vector<float>(step.T() * L.n_v)};
  ref::gated_deltanet_prepare(p.qkv.data(), p.g.data(), p.beta.data(), conv.data(), proj.data(), w.conv_w.data(),
                              w.A_log.data(), w.dt_bias.data(), step.host(), L);
  return p;
}

using RecurrenceFn = void (*)(float*, float*, const float*, const float*, const float*, DeltaNetStep, DeltaNetLayout,
                              cudaStream_t);

TEST(gated_deltanet_cuda, RecurrentAndChunked) {
  SKIP_WITHOUT_GPU();
  for (const DeltaNetLayout& L : {kReal, kOdd}) {
    for (const auto& seqs : {DecodeBatch(), MixedStep()}) {
      const DeltaNetStepData step(seqs);
      const int64_t T = step.T(), V = L.value_dim();
      const Prepared p = RefPrepare(L, step);
      const auto states0 = RandomFloats(kSlots * L.state_size(), 0.3f);
      std::vector<float> o(T * V), states = states0;
      ref::gated_deltanet_recurrent(o.data(), states.data(), p.qkv.data(), p.g.data(), p.beta.data(), step.host(), L);
      for (auto [name, fn] : {std::pair<const char*, RecurrenceFn>{"recurrent", gated_deltanet_recurrent},
                              std::pair<const char*, RecurrenceFn>{"chunked", gated_deltanet_chunked}}) {
        DeviceStep ds(step);
        DeviceBuffer<float> d_qkv(p.qkv), d_g(p.g), d_beta(p.beta), d_states(states0), d_o(T * V);
        d_o.Poison();
        fn(d_o.get(), d_states.get(), d_qkv.get(), d_g.get(), d_beta.get(), ds.view, L, nullptr);
        ExpectClose(Tag(std::string(name) + " o", L, T), d_o.Download(), o, kBound);
        ExpectClose(Tag(std::string(name) + " states", L, T), d_states.Download(), states, kBound);
      }
    }
  }
}

TEST(gated_deltanet_cuda, GatedNorm) {
  SKIP_WITHOUT_GPU();
  for (const DeltaNetLayout& L : {kReal, kOdd}) {
    const int64_t T = 13, V = L.value_dim();
    const DeltaNetTestWeights w(L, 3);
    const auto o = RandomFloats(T * V), proj = RandomFloats(T * L.proj_row());
    DeviceBuffer<float> d_o(o), d_proj(proj), d_out(T * V);
    DeviceBuffer<bf16_bits> d_w(w.norm_w);
    d_out.Poison();
    gated_deltanet_norm(d_out.get(), d_o.get(), d_w.get(), d_proj.get() + L.conv_dim(), L.proj_row(), T, L, 1e-6f,
                        nullptr);
    std::vector<float> want(T * V);
    ref::gated_deltanet_norm(want.data(), o.data(), w.norm_w.data(), proj.data() + L.conv_dim(), L.proj_row(), T, L,
                             1e-6f);
    ExpectClose(Tag("gated norm", L, T), d_out.Download(), want, kBound);
    // In place, as the mixer runs it.
    gated_deltanet_norm(d_o.get(), d_o.get(), d_w.get(), d_proj.get() + L.conv_dim(), L.proj_row(), T, L, 1e-6f,
                        nullptr);
    ExpectClose(Tag("gated norm in place", L, T), d_o.Download(), want, kBound);
  }
}

// The whole core (prepare, then the recurrence) over one sequence of 203 tokens in slot 1: as a
// 200-token chunk (chunked form) and three decodes, or as 203 decode steps. Outputs and the slot's
// conv and recurrent state agree; the other slots are untouched.
TEST(gated_deltanet_cuda, ChainedPrefillThenDecodeEqualsTokenByToken) {
  SKIP_WITHOUT_GPU();
  for (const DeltaNetLayout& L : {kReal, kOdd}) {
    const int64_t N = 203, V = L.value_dim(), C = L.conv_dim(), slot = 1;
    const DeltaNetTestWeights w(L, 4);
    const auto proj = RandomFloats(N * L.proj_row());
    const auto conv0 = RandomFloats(kSlots * L.conv_state_size()), states0 = RandomFloats(kSlots * L.state_size());
    DeviceBuffer<float> d_proj(proj);
    DeviceBuffer<bf16_bits> d_cw(w.conv_w), d_alog(w.A_log), d_dtb(w.dt_bias);
    // Runs tokens [t, t + n) as one step; o's rows [t, t + n) filled.
    auto run = [&](int64_t t, int64_t n, bool chunked, DeviceBuffer<float>& conv, DeviceBuffer<float>& states,
                   DeviceBuffer<float>& o) {
      const DeltaNetStepData step({{static_cast<int32_t>(n), static_cast<int32_t>(t), static_cast<int32_t>(slot)}});
      DeviceStep ds(step);
      DeviceBuffer<float> qkv(n * C), g(n * L.n_v), beta(n * L.n_v);
      gated_deltanet_prepare(qkv.get(), g.get(), beta.get(), conv.get(), d_proj.get() + t * L.proj_row(),
                             d_cw.get(), d_alog.get(), d_dtb.get(), ds.view, L, nullptr);
      (chunked ? gated_deltanet_chunked : gated_deltanet_recurrent)(o.get() + t * V, states.get(), qkv.get(),
                                                                    g.get(), beta.get(), ds.view, L, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
    };
    DeviceBuffer<float> conv_a(conv0), states_a(states0), o_a(N * V), conv_b(conv0), states_b(states0), o_b(N * V);
    o_a.Poison(), o_b.Poison();
    run(0, 200, true, conv_a, states_a, o_a);
    for (int64_t t = 200; t < N; ++t) run(t, 1, false, conv_a, states_a, o_a);
    for (int64_t t = 0; t < N; ++t) run(t, 1, false, conv_b, states_b, o_b);
    const std::string tag = Tag("chained", L, N);
    ExpectClose(tag + " o", o_a.Download(), o_b.Download(), kBound);
    ExpectClose(tag + " states", states_a.Download(), states_b.Download(), kBound);
    EXPECT_EQ(conv_a.Download(), conv_b.Download()) << tag;
    const auto s = states_a.Download();
    for (int64_t i = 0; i < kSlots * L.state_size(); ++i) {
      if (i / L.state_size() != slot) {
        ASSERT_EQ(s[i], states0[i]) << tag << " slot " << i / L.state_size();
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
