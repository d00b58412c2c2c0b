// The staged one-token norm + product (kernels/staged_norm_matmul.h) against the CPU references:
// ref::add_rmsnorm, then ref::matmul_bf16 or ref::matmul_quant of the normed row; and the staged
// product alone (matmul_staged) on that normed row. Under the
// decode-attention split (kernels/carveout.h), where the engine runs it: Qwen3-30B-A3B's q/k/v
// (5120 x 2048) in bf16, FP8 and NVFP4 (on the H100 / H200 bf16 and FP8 at 4096 columns stage part
// of each block's rows before the wait and refill the freed slots after it; NVFP4's fit whole),
// rows that end inside a group of a slot and blocks of one row (77 rows), FP8 scale rows cut by the
// shard (row_block 1, col_phase 16 / 64) and 32-column blocks, a zero-centred norm (w_offset 1),
// and no delta. Bounds: 1e-5 relative for y (float32 sums, as quant_fp8_cuda_test); the residual and
// the normed row as the bf16 fused kernel's test checks them (kernels_cuda_test). Outside the split
// the launcher must refuse (false) and write nothing. Launched ahead with a counter, the kernel waits
// for it before reading its inputs.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kernels/carveout.h"
#include "kernels/matmul.h"
#include "kernels/quant_matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/signal.h"
#include "kernels/staged_norm_matmul.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/quant_stacks.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::Fp8Case;
using testing::Nvfp4Stack;
using testing::RandomBf16;
using testing::RandomFloats;
using testing::Shape;

constexpr double kBound = 1e-5;
constexpr float kEps = 1e-6f;

// One token: the device's staged kernel against the references, for the weight W (device
// descriptor) whose host twin `host` the reference multiplies (null: bf16 `w_bf16`).
void CheckOne(const std::string& tag, const QuantMatrix& W, const QuantMatrix* host,
              const std::vector<bf16_bits>& w_bf16, bool with_delta, float w_offset) {
  const int64_t in = W.cols, out = W.rows;
  const auto x = RandomFloats(in), delta = RandomFloats(in);
  const auto nw = RandomBf16(in, 0.5f);
  DeviceBuffer<float> d_x(x), d_delta(delta), d_y(out), d_xo(in), d_xn(in);
  DeviceBuffer<bf16_bits> d_nw(nw);
  d_y.Poison(), d_xo.Poison(), d_xn.Poison();
  bool launched = false;
  {
    const ScopedLaunchCarveout split(LaunchCarveout::kFitDecodeAttention);
    launched = add_rmsnorm_matmul_staged(d_y.get(), d_xo.get(), d_xn.get(), d_x.get(),
                                         with_delta ? d_delta.get() : nullptr, d_nw.get(), W, kEps, nullptr, w_offset);
  }
  ASSERT_TRUE(launched) << tag << ": the staged form must take this shape under the decode-attention split";
  std::vector<float> residual = x, xn(in), y(out);
  ref::add_rmsnorm(xn.data(), residual.data(), with_delta ? delta.data() : nullptr, nw.data(), 1, in, kEps, w_offset);
  if (host != nullptr) {
    ref::matmul_quant(y.data(), xn.data(), *host, 1);
  } else {
    ref::matmul_bf16(y.data(), xn.data(), w_bf16.data(), 1, in, out);
  }
  const std::string what = tag + (with_delta ? " +delta" : "") + (w_offset != 0.0f ? " offset 1" : "");
  ExpectClose(what + " y", d_y.Download(), y, kBound);
  ExpectClose(what + " residual", d_xo.Download(), residual, kBound);
  ExpectClose(what + " normed", d_xn.Download(), xn, kBound);
  // The staged product alone (matmul_staged), on the reference's normed row.
  DeviceBuffer<float> d_xn_in(xn), d_y2(out);
  d_y2.Poison();
  {
    const ScopedLaunchCarveout split(LaunchCarveout::kFitDecodeAttention);
    ASSERT_TRUE(matmul_staged(d_y2.get(), d_xn_in.get(), W, nullptr)) << tag;
  }
  ExpectClose(tag + " product alone y", d_y2.Download(), y, kBound);
}

TEST(staged_norm_matmul_cuda, Bf16) {
  SKIP_WITHOUT_GPU();
  for (auto [out, in] : std::vector<std::array<int64_t, 2>>{{5120, 2048}, {77, 2048}, {1000, 4096}, {300, 512}}) {
    const auto w = RandomBf16(out * in, 0.05f);
    DeviceBuffer<bf16_bits> d_w(w);
    QuantMatrix W = QuantMatrix::Layout(WeightFormat::kBf16, 1, out, in);
    W.data = d_w.get();
    for (bool with_delta : {true, false}) {
      CheckOne("staged bf16 " + Shape({out, in}), W, nullptr, w, with_delta, 0.0f);
    }
    CheckOne("staged bf16 " + Shape({out, in}), W, nullptr, w, true, 1.0f);
  }
}

TEST(staged_norm_matmul_cuda, Fp8) {
  SKIP_WITHOUT_GPU();
  const std::vector<Fp8Case> cases = {
      {1, 5120, 2048},                          // q/k/v, 128 x 128 blocks
      {1, 5120, 4096},                          // more bytes a block than its slots: refills
      {1, 77, 2048, 128, 128, true},            // one row a block, a scale row per row
      {1, 200, 1024, 128, 128, false, 64},      // a shard starting inside a block
      {1, 100, 512, 32, 32, true, 16},          // 32-column blocks
  };
  for (const Fp8Case& c : cases) {
    const auto W = testing::RandomFp8(c);
    CheckOne("staged fp8 " + testing::Describe(c), W->device, &W->host, {}, true, 0.0f);
    CheckOne("staged fp8 " + testing::Describe(c), W->device, &W->host, {}, false, 1.0f);
  }
}

TEST(staged_norm_matmul_cuda, Nvfp4) {
  SKIP_WITHOUT_GPU();
  for (auto [out, in] : std::vector<std::array<int64_t, 2>>{{5120, 2048}, {77, 2048}, {640, 4096}, {33, 256}}) {
    Nvfp4Stack W(1, out, in);
    CheckOne("staged nvfp4 " + Shape({out, in}), W.device, &W.host, {}, true, 0.0f);
    CheckOne("staged nvfp4 " + Shape({out, in}), W.device, &W.host, {}, false, 1.0f);
  }
}

// Launched ahead of its input (StagedReady): the kernel copies its weights, then waits for the
// counter. Its x and delta are NaN until another stream copies them in and only then raises the
// counter; the kernel must still be running when the copies start (it waited) and give the
// reference's values of the copied inputs (it read them after the counter). kernels::signal_done
// raises a counter once a stream's earlier work is done.
TEST(staged_norm_matmul_cuda, WaitsForItsCounter) {
  SKIP_WITHOUT_GPU();
  for (const bool quantized : {false, true}) {
    const int64_t out = 5120, in = 2048;
    const auto w = RandomBf16(out * in, 0.05f);
    DeviceBuffer<bf16_bits> d_w(w);
    QuantMatrix Wb = QuantMatrix::Layout(WeightFormat::kBf16, 1, out, in);
    Wb.data = d_w.get();
    Nvfp4Stack Wq(1, out, in);
    const QuantMatrix& W = quantized ? Wq.device : Wb;
    const auto x = RandomFloats(in), delta = RandomFloats(in);
    const auto nw = RandomBf16(in, 0.5f);
    DeviceBuffer<float> d_x(in), d_delta(in), d_y(out), d_xo(in);
    DeviceBuffer<bf16_bits> d_nw(nw);
    DeviceBuffer<uint32_t> d_counter(std::vector<uint32_t>{0});
    d_x.Poison(), d_delta.Poison(), d_y.Poison(), d_xo.Poison();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the poison is in place before the streams start
    cudaStream_t producer = nullptr, consumer = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
    const StagedReady ready{d_counter.get(), 1};
    {
      const ScopedLaunchCarveout split(LaunchCarveout::kFitDecodeAttention);
      ASSERT_TRUE(add_rmsnorm_matmul_staged(d_y.get(), d_xo.get(), nullptr, d_x.get(), d_delta.get(), d_nw.get(), W,
                                            kEps, consumer, 0.0f, &ready));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(cudaStreamQuery(consumer), cudaErrorNotReady) << "the kernel waits for its counter";
    ASSERT_EQ(cudaMemcpyAsync(d_x.get(), x.data(), in * sizeof(float), cudaMemcpyHostToDevice, producer), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(d_delta.get(), delta.data(), in * sizeof(float), cudaMemcpyHostToDevice, producer),
              cudaSuccess);
    signal_done(d_counter.get(), producer);
    ASSERT_EQ(cudaStreamSynchronize(producer), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
    std::vector<float> residual = x, xn(in), y(out);
    ref::add_rmsnorm(xn.data(), residual.data(), delta.data(), nw.data(), 1, in, kEps);
    if (quantized) {
      ref::matmul_quant(y.data(), xn.data(), Wq.host, 1);
    } else {
      ref::matmul_bf16(y.data(), xn.data(), w.data(), 1, in, out);
    }
    const std::string tag = std::string("staged ahead ") + (quantized ? "nvfp4" : "bf16");
    ExpectClose(tag + " y", d_y.Download(), y, kBound);
    ExpectClose(tag + " residual", d_xo.Download(), residual, kBound);
    EXPECT_EQ(d_counter.Download()[0], 1u);
    signal_done(d_counter.get(), producer);
    ASSERT_EQ(cudaStreamSynchronize(producer), cudaSuccess);
    EXPECT_EQ(d_counter.Download()[0], 2u) << "signal_done adds one";
    cudaStreamDestroy(producer);
    cudaStreamDestroy(consumer);
  }
}

// Outside the decode-attention split, and for a layout without a staged form (NVFP4 rows of 272
// columns; FP8 loads straddling scale blocks), nothing is launched: the caller keeps its other forms.
TEST(staged_norm_matmul_cuda, RefusesWhereItDoesNotApply) {
  SKIP_WITHOUT_GPU();
  const int64_t out = 64, in = 512;
  const auto w = RandomBf16(out * in, 0.05f);
  DeviceBuffer<bf16_bits> d_w(w), d_nw(RandomBf16(in));
  DeviceBuffer<float> d_x(RandomFloats(in)), d_y(out), d_xo(in);
  QuantMatrix W = QuantMatrix::Layout(WeightFormat::kBf16, 1, out, in);
  W.data = d_w.get();
  d_y.Poison(), d_xo.Poison();
  EXPECT_FALSE(add_rmsnorm_matmul_staged(d_y.get(), d_xo.get(), nullptr, d_x.get(), nullptr, d_nw.get(), W, kEps,
                                         nullptr))
      << "the driver's own split";
  EXPECT_FALSE(matmul_staged(d_y.get(), d_x.get(), W, nullptr)) << "the driver's own split, product alone";
  const ScopedLaunchCarveout split(LaunchCarveout::kFitDecodeAttention);
  Nvfp4Stack odd(1, out, 272);
  DeviceBuffer<float> d_x272(RandomFloats(272)), d_xo272(272);
  DeviceBuffer<bf16_bits> d_nw272(RandomBf16(272));
  d_xo272.Poison();
  EXPECT_FALSE(add_rmsnorm_matmul_staged(d_y.get(), d_xo272.get(), nullptr, d_x272.get(), nullptr, d_nw272.get(),
                                         odd.device, kEps, nullptr))
      << "nvfp4 rows of 272 columns";
  EXPECT_FALSE(matmul_staged(d_y.get(), d_x272.get(), odd.device, nullptr)) << "nvfp4 rows of 272 columns, alone";
  const auto straddling = testing::RandomFp8({1, 64, 96, 48, 48, true});
  DeviceBuffer<float> d_x96(RandomFloats(96)), d_xo96(96);
  DeviceBuffer<bf16_bits> d_nw96(RandomBf16(96));
  d_xo96.Poison();
  EXPECT_FALSE(add_rmsnorm_matmul_staged(d_y.get(), d_xo96.get(), nullptr, d_x96.get(), nullptr, d_nw96.get(),
                                         straddling->device, kEps, nullptr))
      << "fp8 per-element scales";
  CUDA_CHECK(cudaDeviceSynchronize());
  for (const float v : d_y.Download()) EXPECT_TRUE(std::isnan(v)) << "nothing may write y";
  for (const float v : d_xo.Download()) EXPECT_TRUE(std::isnan(v)) << "nothing may write the residual";
}

}  // namespace
}  // namespace tandem::kernels
