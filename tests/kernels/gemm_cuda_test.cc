// The prefill products (kernels/gemm.h: cuBLAS; kernels/moe_gemm.h: grouped MoE GEMM) against the
// CPU references on fresh random inputs with poisoned outputs, at the tiny model's and Qwen3-30B-A3B's
// shapes and ragged ones (token counts off the tile size, experts with no pairs, one expert with
// all of them, expert ids up to kMaxExperts - 1). Bound 1e-2: the activations are rounded to bf16.
// The router's product (gemm_bf16_split, matmul_bf16_float_input) keeps its float32 input: bound
// 1e-5 of the largest output, which the bf16-input product misses by two orders of magnitude.
// The scratch reservations report out of memory instead of aborting.
// (Their throughput at 2048 tokens is bench/prefill_gemm_bench.)
// Skips (with the reason) where no GPU is present.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/matmul.h"
#include "kernels/matmul_batched.h"
#include "kernels/moe.h"
#include "kernels/moe_gemm.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::RandomBf16;
using testing::RandomFloats;
using testing::Rng;
using testing::MaxRelError;
using testing::MedianUs;
using testing::SameBits;
using testing::Shape;
using testing::WideChannelFloats;

constexpr double kBound = 1e-2;

TEST(gemm_cuda, DenseMatchesReference) {
  SKIP_WITHOUT_GPU();
  // (T, in, out): qkv, o_proj, router, dense MLP and odd shapes; T = 1 and T below 64 go through
  // cuBLAS too when called directly.
  for (auto [T, in, out] : std::vector<std::array<int64_t, 3>>{
           {64, 2048, 5120}, {130, 4096, 2048}, {257, 2048, 128}, {77, 128, 4096}, {1, 128, 384}, {5, 256, 37},
           {100, 768, 2048}}) {
    auto x = RandomFloats(T * in);
    auto w = RandomBf16(out * in, 0.05f);
    DeviceBuffer<float> d_x(x), d_y(T * out);
    DeviceBuffer<bf16_bits> d_w(w);
    d_y.Poison();
    ASSERT_TRUE(gemm_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr))
        << "cuBLAS could not be loaded (see the 'tandem kernels:' line on stderr)";
    std::vector<float> want(T * out);
    ref::matmul_bf16(want.data(), x.data(), w.data(), T, in, out);
    const auto got = d_y.Download();
    ExpectClose("gemm_bf16 " + Shape({T, in, out}), got, want, kBound);
    // The same call again gives the same bits.
    d_y.Poison();
    gemm_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr);
    EXPECT_TRUE(SameBits(d_y.Download(), got)) << "gemm_bf16 not deterministic " << Shape({T, in, out});
  }
}

// float32-like: x split as hi + lo is off by <= 2^-16 relative per value (~3e-6 of the largest
// output at these shapes), and float32 accumulation adds about as much. bf16(x) alone is off by up
// to 2^-8 per value: ~1e-3 of the largest output.
constexpr double kFloat32Bound = 1e-5;

TEST(gemm_cuda, SplitKeepsFloat32Input) {
  SKIP_WITHOUT_GPU();
  // (T, in, out): Qwen3-30B-A3B's router (128 experts) at prefill lengths from the threshold up;
  // Qwen3.5's 256 experts + the shared expert's gate row; a ragged one (T, in and out off every tile).
  for (auto [T, in, out] : std::vector<std::array<int64_t, 3>>{
           {64, 2048, 128}, {512, 2048, 128}, {2048, 2048, 128}, {200, 2048, 257}, {333, 776, 37}}) {
    const std::string tag = Shape({T, in, out});
    const auto x = WideChannelFloats(T, in);
    const auto w = RandomBf16(out * in, 0.05f);
    DeviceBuffer<float> d_x(x), d_y(T * out);
    DeviceBuffer<bf16_bits> d_w(w);
    std::vector<float> want(T * out);
    ref::matmul_bf16(want.data(), x.data(), w.data(), T, in, out);

    d_y.Poison();
    ASSERT_TRUE(gemm_bf16_split(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr))
        << "cuBLAS could not be loaded (see the 'tandem kernels:' line on stderr)";
    const auto got = d_y.Download();
    const double split_err = MaxRelError(got, want);
    d_y.Poison();
    gemm_bf16_split(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr);
    EXPECT_TRUE(SameBits(d_y.Download(), got)) << "gemm_bf16_split not deterministic " << tag;

    // The same product with x rounded to bf16 once (matmul_bf16's prefill path) and on the float32
    // matrix-vector kernels (the router's product before): the bound tells the first from float32.
    d_y.Poison();
    ASSERT_TRUE(gemm_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr));
    const double bf16_err = MaxRelError(d_y.Download(), want);
    d_y.Poison();
    matvec_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr);
    const double matvec_err = MaxRelError(d_y.Download(), want);

    std::printf("%-24s max err / max |ref|: split %.3g, matvec %.3g, bf16 x %.3g (bound %.0e); y[0..2] = %.5f %.5f "
                "%.5f vs ref %.5f %.5f %.5f\n",
                tag.c_str(), split_err, matvec_err, bf16_err, kFloat32Bound, got[0], got[1], got[2], want[0], want[1],
                want[2]);
    EXPECT_LT(split_err, kFloat32Bound) << "gemm_bf16_split " << tag;
    EXPECT_LT(matvec_err, kFloat32Bound) << "matvec_bf16 " << tag;
    EXPECT_GT(bf16_err, 10 * kFloat32Bound) << "gemm_bf16 (bf16 x) within 10x the float32 bound " << tag;
  }
}

// What a 2048-token prefill spends per layer on Qwen3-30B-A3B's router product (printed, not
// checked: the A/B of the step itself is cuda_decode_bench's prefill rows).
TEST(gemm_cuda, SplitRouterTimes) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 2048, in = 2048, out = 128;
  DeviceBuffer<float> d_x(RandomFloats(T * in)), d_y(T * out);
  DeviceBuffer<bf16_bits> d_w(RandomBf16(out * in, 0.05f));
  ASSERT_EQ(ReserveGemm(nullptr, T, in, in), cudaSuccess);
  const double split = MedianUs([&] { gemm_bf16_split(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr); }, 20);
  const double matvec = MedianUs([&] { matvec_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr); }, 20);
  const double bf16 = MedianUs([&] { gemm_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr); }, 20);
  std::printf("router %s per call: gemm_bf16_split %.1f us, matvec_bf16 %.1f us (%.2fx), gemm_bf16 (bf16 x) %.1f us\n",
              Shape({T, in, out}).c_str(), split, matvec, matvec / split, bf16);
}

// matmul_bf16_float_input: the split GEMM from kGemmMinTokens on (the same bits as
// gemm_bf16_split), the matrix-vector kernels below it and inside a graph capture at any T (the
// same bits as matvec_bf16): decode steps run what they ran before.
TEST(gemm_cuda, FloatInputDispatch) {
  SKIP_WITHOUT_GPU();
  const int64_t n = kGemmMinTokens, in = 2048, out = 128;
  for (int64_t T : {n > 1 ? n - 1 : n, n, std::max<int64_t>(n, 2048)}) {
    const std::string tag = Shape({T, in, out});
    const auto x = WideChannelFloats(T, in);
    const auto w = RandomBf16(out * in, 0.05f);
    DeviceBuffer<float> d_x(x), d_y(T * out), d_path(T * out);
    DeviceBuffer<bf16_bits> d_w(w);
    d_y.Poison();
    matmul_bf16_float_input(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr);
    const auto got = d_y.Download();
    std::vector<float> want(T * out);
    ref::matmul_bf16(want.data(), x.data(), w.data(), T, in, out);
    const double err = MaxRelError(got, want);
    const bool gemm = T >= n;
    std::printf("matmul_bf16_float_input %-16s (%s) max err / max |ref| %.3g (bound %.0e)\n", tag.c_str(),
                gemm ? "split GEMM" : "matvec", err, kFloat32Bound);
    EXPECT_LT(err, kFloat32Bound) << tag;
    d_path.Poison();
    if (gemm) {
      ASSERT_TRUE(gemm_bf16_split(d_path.get(), d_x.get(), d_w.get(), T, in, out, nullptr));
    } else {
      matvec_bf16(d_path.get(), d_x.get(), d_w.get(), T, in, out, nullptr);
    }
    EXPECT_TRUE(SameBits(d_path.Download(), got)) << tag << " did not take " << (gemm ? "gemm_bf16_split" : "matvec");

    // Captured into a graph (as decode steps are), the product stays on the matrix-vector kernels.
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    matmul_bf16_float_input(d_y.get(), d_x.get(), d_w.get(), T, in, out, s);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    d_y.Poison();
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    d_path.Poison();
    matvec_bf16(d_path.get(), d_x.get(), d_w.get(), T, in, out, nullptr);
    EXPECT_TRUE(SameBits(d_y.Download(), d_path.Download())) << tag << " captured: not the matvec kernels";
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
}

// The reservations a model makes before a prefill step: more memory than the device has comes back
// as cudaErrorMemoryAllocation (no abort, no error left for the next launch to trip on), and the
// scratch serves the next step after a reservation that fits.
TEST(gemm_cuda, ReserveReportsOutOfMemoryAndRecovers) {
  SKIP_WITHOUT_GPU();
  // 2^40 tokens of 4096 inputs in bf16; 2^23 routed pairs' partial rows of 2^14 floats (512 GiB).
  EXPECT_EQ(ReserveGemm(nullptr, int64_t{1} << 40, 4096), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // The split products' hi and lo count too (no plain inputs asked for).
  EXPECT_EQ(ReserveGemm(nullptr, int64_t{1} << 40, 0, 4096), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(ReserveMoeGrouped(nullptr, int64_t{1} << 20, 8, int64_t{1} << 14, 64), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // Sizes the grouped path does not take reserve nothing.
  EXPECT_EQ(ReserveMoeGrouped(nullptr, int64_t{1} << 20, 8, 136, 64), cudaSuccess);

  const int64_t T = 96, in = 256, out = 128;
  ASSERT_EQ(ReserveGemm(nullptr, T, in), cudaSuccess);
  auto x = RandomFloats(T * in);
  auto w = RandomBf16(out * in, 0.05f);
  DeviceBuffer<float> d_x(x), d_y(T * out);
  DeviceBuffer<bf16_bits> d_w(w);
  d_y.Poison();
  ASSERT_TRUE(gemm_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr));
  std::vector<float> want(T * out);
  ref::matmul_bf16(want.data(), x.data(), w.data(), T, in, out);
  ExpectClose("gemm_bf16 after a failed reservation " + Shape({T, in, out}), d_y.Download(), want, kBound);
}

// matmul_bf16 itself on both sides of the threshold (the decode kernels below, cuBLAS from it on).
TEST(gemm_cuda, MatmulDispatch) {
  SKIP_WITHOUT_GPU();
  const int64_t n = kGemmMinTokens, in = 1024, out = 640;
  for (int64_t T : {n > 1 ? n - 1 : n, n, n + 37}) {
    auto x = RandomFloats(T * in);
    auto w = RandomBf16(out * in, 0.05f);
    DeviceBuffer<float> d_x(x), d_y(T * out);
    DeviceBuffer<bf16_bits> d_w(w);
    d_y.Poison();
    matmul_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr);
    std::vector<float> want(T * out);
    ref::matmul_bf16(want.data(), x.data(), w.data(), T, in, out);
    ExpectClose("matmul_bf16 dispatch " + Shape({T, in, out}), d_y.Download(), want, kBound);
  }
}

// The threshold is the caller's (the model passes ModelLoadOptions::cuda_gemm_min_tokens): at 5
// tokens, far below kGemmMinTokens, a threshold of 1 puts every entry point on its prefill path
// (the same bits as calling that path directly) and a threshold of 6 keeps each on its decode
// kernels (the same bits as the default threshold, under which 5 tokens are decode too).
TEST(gemm_cuda, ThresholdFromCaller) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t T = 5, in = 1024, out = 640, E = 16, K = 4, H = 128, I = 64;
  static_assert(T < kMatmulBatchedMinTokens && T < kGemmMinTokens);
  const std::string tag = Shape({T, in, out});
  auto x = RandomFloats(T * in);
  auto w = RandomBf16(out * in, 0.05f);
  DeviceBuffer<float> d_x(x), d_y(T * out), d_path(T * out);
  DeviceBuffer<bf16_bits> d_w(w);
  const auto same = [&](const char* what, auto&& run, auto&& path) {
    d_y.Poison();
    run();
    d_path.Poison();
    path();
    EXPECT_TRUE(SameBits(d_y.Download(), d_path.Download())) << what << " " << tag;
  };
  same("matmul_bf16 threshold 1 = gemm_bf16",
       [&] { matmul_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr, 1); },
       [&] { ASSERT_TRUE(gemm_bf16(d_path.get(), d_x.get(), d_w.get(), T, in, out, nullptr)); });
  same("matmul_bf16 threshold 6 = matvec_bf16",
       [&] { matmul_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr, 6); },
       [&] { matvec_bf16(d_path.get(), d_x.get(), d_w.get(), T, in, out, nullptr); });
  same("matmul_bf16_float_input threshold 1 = gemm_bf16_split",
       [&] { matmul_bf16_float_input(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr, 1); },
       [&] { ASSERT_TRUE(gemm_bf16_split(d_path.get(), d_x.get(), d_w.get(), T, in, out, nullptr)); });
  same("matmul_bf16_float_input threshold 6 = matvec_bf16",
       [&] { matmul_bf16_float_input(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr, 6); },
       [&] { matvec_bf16(d_path.get(), d_x.get(), d_w.get(), T, in, out, nullptr); });
  // The gemm path really is another computation here (x rounded to bf16): the bits differ.
  std::vector<float> gemm(T * out), matvec(T * out);
  matmul_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr, 1);
  gemm = d_y.Download();
  matmul_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr, 6);
  matvec = d_y.Download();
  EXPECT_FALSE(SameBits(gemm, matvec)) << "matmul_bf16: thresholds 1 and 6 gave the same bits " << tag;

  // The experts (grouped sizes: H and I multiples of 64).
  auto xe = RandomFloats(T * H);
  auto gate_up = RandomBf16(E * 2 * I * H, 0.05f), down = RandomBf16(E * H * I, 0.05f);
  std::vector<int32_t> ids(T * K);
  for (int64_t p = 0; p < T * K; ++p) ids[p] = static_cast<int32_t>((p * 7) % E);  // distinct within a token
  const std::vector<float> weights = RandomFloats(T * K);
  DeviceBuffer<float> d_xe(xe), d_wts(weights), d_act(T * K * I), d_act_path(T * K * I), d_out(T * H),
      d_out_path(T * H);
  DeviceBuffer<bf16_bits> d_gu(gate_up), d_down(down);
  DeviceBuffer<int32_t> d_ids(ids);
  ASSERT_TRUE(MoeGroupedSupported(d_xe.get(), d_gu.get(), H, I));
  for (const int64_t threshold : {int64_t{1}, int64_t{6}}) {
    const std::string what = "moe threshold " + std::to_string(threshold) + " " + Shape({T, E, K, H, I});
    d_act.Poison();
    d_out.Poison();
    moe_gate_up(d_act.get(), d_xe.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr, threshold);
    moe_down(d_out.get(), d_act.get(), d_ids.get(), d_wts.get(), d_down.get(), T, K, H, I, nullptr,
             /*follows_gate_up=*/true, threshold);
    d_act_path.Poison();
    d_out_path.Poison();
    if (threshold == 1) {
      ASSERT_TRUE(moe_gate_up_grouped(d_act_path.get(), d_xe.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr));
      ASSERT_TRUE(moe_down_grouped(d_out_path.get(), d_act_path.get(), d_ids.get(), d_wts.get(), d_down.get(), T, K,
                                   H, I, nullptr));
    } else {  // the default threshold: 5 tokens are a decode step
      moe_gate_up(d_act_path.get(), d_xe.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr);
      moe_down(d_out_path.get(), d_act_path.get(), d_ids.get(), d_wts.get(), d_down.get(), T, K, H, I, nullptr, true);
    }
    EXPECT_TRUE(SameBits(d_act.Download(), d_act_path.Download())) << what << ": gate_up";
    EXPECT_TRUE(SameBits(d_out.Download(), d_out_path.Download())) << what << ": down";
    std::vector<float> act(T * K * I), want(T * H);
    ref::moe_gate_up(act.data(), xe.data(), ids.data(), gate_up.data(), T, K, H, I);
    ref::moe_down(want.data(), act.data(), ids.data(), weights.data(), down.data(), T, K, H, I);
    ExpectClose(what + " down", d_out.Download(), want, kBound);
  }
}

enum class Routing { kUniform, kOneExpert, kSkewed, kTopIds };

std::vector<int32_t> Route(Routing r, int64_t T, int64_t E, int64_t K) {
  std::vector<int32_t> ids(T * K);
  std::vector<int32_t> perm(E);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    for (int64_t k = 0; k < K; ++k) {
      int32_t e = perm[k];  // K distinct experts, like the router gives
      if (r == Routing::kOneExpert) e = static_cast<int32_t>(E / 2);
      if (r == Routing::kSkewed && k == 0) e = 0;  // expert 0 in every token (perm may repeat it: fine)
      if (r == Routing::kTopIds) e = static_cast<int32_t>(E - 1 - perm[k] % 3);  // only the 3 highest ids
      ids[t * K + k] = e;
    }
  }
  return ids;
}

struct MoeCase {
  int64_t T, E, K, H, I;
  Routing routing;
  const char* what;
};

TEST(gemm_cuda, MoeGroupedMatchesReference) {
  SKIP_WITHOUT_GPU();
  for (const MoeCase& c : {
           MoeCase{70, 16, 4, 128, 64, Routing::kUniform, "tiny model"},
           MoeCase{37, 128, 8, 2048, 768, Routing::kUniform, "qwen3-30b, ragged, empty experts"},
           MoeCase{100, 128, 8, 2048, 768, Routing::kSkewed, "qwen3-30b, expert 0 in every token"},
           MoeCase{200, 16, 2, 256, 128, Routing::kOneExpert, "one expert has every pair"},
           MoeCase{65, 8, 3, 192, 320, Routing::kUniform, "H not a multiple of 128"},
           MoeCase{256, 16, 4, 2048, 192, Routing::kUniform, "TP 4 shard of qwen3-30b, full pair tiles"},
           MoeCase{300, kMaxExperts, 8, 64, 64, Routing::kTopIds, "ids up to kMaxExperts-1"},
           MoeCase{1, 16, 4, 128, 64, Routing::kUniform, "one token"},
           // Past 4096 pairs the sort counts and scatters by blocks of 2048 pairs (moe_pairs.cuh).
           MoeCase{600, 128, 8, 128, 64, Routing::kUniform, "4800 pairs, the last sort block partial"},
           MoeCase{1100, 128, 8, 128, 64, Routing::kSkewed, "8800 pairs, expert 0 in every token"},
           MoeCase{2500, 16, 2, 64, 64, Routing::kOneExpert, "5000 pairs of one expert"},
           MoeCase{700, kMaxExperts, 8, 64, 64, Routing::kTopIds, "5600 pairs, ids up to kMaxExperts-1"},
       }) {
    const int64_t T = c.T, E = c.E, K = c.K, H = c.H, I = c.I;
    auto x = RandomFloats(T * H);
    auto gate_up = RandomBf16(E * 2 * I * H, 0.05f), down = RandomBf16(E * H * I, 0.05f);
    const std::vector<int32_t> ids = Route(c.routing, T, E, K);
    const std::vector<float> weights = RandomFloats(T * K);
    DeviceBuffer<float> d_x(x), d_w(weights), d_act(T * K * I), d_out(T * H);
    DeviceBuffer<bf16_bits> d_gu(gate_up), d_down(down);
    DeviceBuffer<int32_t> d_ids(ids);
    const std::string tag = Shape({T, E, K, H, I}) + " " + c.what;

    d_act.Poison();
    ASSERT_TRUE(moe_gate_up_grouped(d_act.get(), d_x.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr)) << tag;
    std::vector<float> act(T * K * I), out(T * H);
    ref::moe_gate_up(act.data(), x.data(), ids.data(), gate_up.data(), T, K, H, I);
    const auto got_act = d_act.Download();
    ExpectClose("moe_gate_up_grouped " + tag, got_act, act, kBound);
    d_act.Poison();  // again: the sort's order within an expert varies, the bits must not
    moe_gate_up_grouped(d_act.get(), d_x.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr);
    EXPECT_TRUE(SameBits(d_act.Download(), got_act)) << "moe_gate_up_grouped not deterministic " << tag;

    // moe_down from the reference activations, so each kernel is checked on its own.
    d_act.Upload(act);
    d_out.Poison();
    ASSERT_TRUE(moe_down_grouped(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), d_down.get(), T, K, H, I,
                                 nullptr))
        << tag;
    ref::moe_down(out.data(), act.data(), ids.data(), weights.data(), down.data(), T, K, H, I);
    const auto got_out = d_out.Download();
    ExpectClose("moe_down_grouped " + tag, got_out, out, kBound);
    d_out.Poison();
    moe_down_grouped(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), d_down.get(), T, K, H, I, nullptr);
    EXPECT_TRUE(SameBits(d_out.Download(), got_out)) << "moe_down_grouped not deterministic " << tag;

    // moe_grouped: the two kernels chained on the device's own act, bit for bit, and near the
    // reference chain.
    ASSERT_TRUE(moe_gate_up_grouped(d_act.get(), d_x.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr)) << tag;
    ASSERT_TRUE(moe_down_grouped(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), d_down.get(), T, K, H, I,
                                 nullptr))
        << tag;
    const auto chained = d_out.Download();
    d_out.Poison();
    ASSERT_TRUE(moe_grouped(d_out.get(), d_x.get(), d_ids.get(), d_w.get(), d_gu.get(), d_down.get(), T, K, H, I,
                            nullptr))
        << tag;
    const auto fused = d_out.Download();
    EXPECT_TRUE(SameBits(fused, chained)) << "moe_grouped differs from gate_up then down " << tag;
    ExpectClose("moe_grouped " + tag, fused, out, kBound);
  }
}

// moe_gate_up / moe_down at or above the threshold: the grouped path where the sizes allow it, the
// decode kernels where they do not (H = 136).
TEST(gemm_cuda, MoeDispatch) {
  SKIP_WITHOUT_GPU();
  const int64_t T = kGemmMinTokens + 3, E = 16, K = 4;
  for (auto [H, I] : std::vector<std::array<int64_t, 2>>{{128, 64}, {136, 64}}) {
    auto x = RandomFloats(T * H);
    auto gate_up = RandomBf16(E * 2 * I * H, 0.05f), down = RandomBf16(E * H * I, 0.05f);
    const std::vector<int32_t> ids = Route(Routing::kUniform, T, E, K);
    const std::vector<float> weights = RandomFloats(T * K);
    DeviceBuffer<float> d_x(x), d_w(weights), d_act(T * K * I), d_out(T * H);
    DeviceBuffer<bf16_bits> d_gu(gate_up), d_down(down);
    DeviceBuffer<int32_t> d_ids(ids);
    const bool grouped = MoeGroupedSupported(d_x.get(), d_gu.get(), H, I);
    EXPECT_EQ(grouped, H % 64 == 0);
    const std::string tag = Shape({T, E, K, H, I}) + (grouped ? " grouped" : " decode kernels");
    d_act.Poison();
    d_out.Poison();
    moe_gate_up(d_act.get(), d_x.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr);
    moe_down(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), d_down.get(), T, K, H, I, nullptr);
    std::vector<float> act(T * K * I), out(T * H);
    ref::moe_gate_up(act.data(), x.data(), ids.data(), gate_up.data(), T, K, H, I);
    ref::moe_down(out.data(), act.data(), ids.data(), weights.data(), down.data(), T, K, H, I);
    ExpectClose("moe dispatch gate_up " + tag, d_act.Download(), act, kBound);
    ExpectClose("moe dispatch down " + tag, d_out.Download(), out, kBound);
  }
}

}  // namespace
}  // namespace tandem::kernels
