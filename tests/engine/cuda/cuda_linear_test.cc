// The cuda backend's linears (engine/cuda/linear.h) on real quantized weights: layer 0 of
// qwen3moe-fp8-tiny and qwen3moe-nvfp4-tiny on rank 1 of TP 2, packed (engine/model/quant_pack.h)
// and uploaded. LinearMatmul against x W^T over the host DequantAt in double: decode-sized T on the
// quantized kernels within 1e-5 relative L2 (float32 throughout), prefill-sized T (dequantized to
// bf16, the bf16 GEMM path, its input rounded to bf16) within 1e-2. The expert stacks dequantized
// into the scratch equal bf16(DequantAt) bit for bit; the split prefill (hi + lo) holds 1e-5 and
// splits the stacks bit for bit. RandomWeights' quantized linears are finite
// with the bf16 random weights' mean square (1 / fan_in) within 15%. Skips where no GPU is present.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cuda/layers.h"
#include "engine/cuda/linear.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/quant_pack.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"
#include "kernels/gemm.h"
#include "kernels/matmul.h"
#include "tests/common/test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::engine {
namespace {

using kernels::testing::DeviceBuffer;
using kernels::WeightFormat;

// Layer 0 of `fixture` as rank 1 of 2 describes it.
struct Layer0 {
  std::unique_ptr<Checkpoint> ckpt;
  MoeWeightSpec experts;
  AttentionWeightSpec attention;
};

Layer0 Describe(const std::string& fixture) {
  const std::string dir = ::tandem::testing::TestdataDir() + "/" + fixture;
  Layer0 l;
  auto config = LoadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  auto ckpt = Checkpoint::Open(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!config.ok() || !ckpt.ok()) return l;
  l.ckpt = std::move(*ckpt);
  auto names = ResolveWeightNames(*l.ckpt, *config);
  EXPECT_TRUE(names.ok()) << names.status();
  const TpShard shard = ComputeTpShard(*config, 1, 2);
  l.attention = DescribeAttention(*names, *config, shard, 0);
  l.experts = DescribeMoe(*names, *config, shard, 0);
  return l;
}

// y (T, rows) = x W^T over the host arrays, in double.
std::vector<float> HostProduct(const QuantPack& p, const std::vector<float>& x, int64_t T) {
  const kernels::QuantMatrix q = p.View();
  std::vector<float> y(T * q.rows);
  for (int64_t r = 0; r < q.rows; ++r) {
    std::vector<double> w(q.cols);
    for (int64_t c = 0; c < q.cols; ++c) w[c] = kernels::DequantAt(q, 0, r, c);
    for (int64_t t = 0; t < T; ++t) {
      double acc = 0;
      for (int64_t c = 0; c < q.cols; ++c) acc += x[t * q.cols + c] * w[c];
      y[t * q.rows + r] = static_cast<float>(acc);
    }
  }
  return y;
}

class cuda_linear : public ::testing::TestWithParam<std::string> {};

TEST_P(cuda_linear, ProductsMatchTheDequantizedWeights) {
  SKIP_WITHOUT_GPU();
  Layer0 l = Describe(GetParam());
  ASSERT_NE(l.ckpt, nullptr);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (const WeightSpec* spec : {&l.attention.wqkv, &l.attention.wo}) {
    auto pack = PackQuantWeight(*l.ckpt, *spec);
    ASSERT_TRUE(pack.ok()) << pack.status();
    ASSERT_NE(pack->format, WeightFormat::kBf16) << spec->slices[0].name;
    cuda::LinearWeight w;
    ASSERT_TRUE(w.Upload(*pack).ok());
    EXPECT_EQ(w.device_bytes(), pack->View().matrix_bytes());
    DeviceBuffer<kernels::bf16_bits> scratch(w.dequant_elems());
    const cuda::DequantScratch dq{scratch.get(), w.dequant_elems()};
    // The default threshold on both sides of it, and 5 tokens with a threshold of 1 (the model's
    // cuda_gemm_min_tokens as the gemm-path tests set it): the prefill path below 64 tokens.
    for (auto [T, threshold] : std::vector<std::pair<int64_t, int64_t>>{
             {1, kernels::kGemmMinTokens}, {5, kernels::kGemmMinTokens}, {100, kernels::kGemmMinTokens}, {5, 1}}) {
      const std::vector<float> x = kernels::testing::RandomFloats(T * w.cols());
      DeviceBuffer<float> dx(x), dy(T * w.rows());
      dy.Poison();
      const bool gemm = kernels::UseGemmPath(T, threshold, stream);
      EXPECT_EQ(gemm, T >= threshold);
      ASSERT_TRUE(cuda::LinearMatmul(dy.get(), dx.get(), w, T, dq, stream, threshold).ok());
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      kernels::testing::ExpectClose(GetParam() + " " + spec->slices[0].name + " T=" + std::to_string(T) +
                                        (gemm ? " (gemm)" : ""),
                                    dy.Download(), HostProduct(*pack, x, T), gemm ? 1e-2 : 1e-5);
    }
  }
  // The expert stacks into the scratch: bf16(DequantAt) exactly (round to nearest even).
  for (const WeightSpec* spec : {&l.experts.gate_up, &l.experts.down}) {
    auto pack = PackQuantWeight(*l.ckpt, *spec);
    ASSERT_TRUE(pack.ok()) << pack.status();
    cuda::LinearWeight w;
    ASSERT_TRUE(w.Upload(*pack).ok());
    EXPECT_EQ(w.device_bytes(), pack->count * pack->View().matrix_bytes());
    DeviceBuffer<kernels::bf16_bits> scratch(w.dequant_elems());
    scratch.Poison();
    auto out = cuda::DequantizeToScratch(w, cuda::DequantScratch{scratch.get(), w.dequant_elems()}, stream);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_FALSE(cuda::DequantizeToScratch(w, cuda::DequantScratch{scratch.get(), w.dequant_elems() - 1}, stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<kernels::bf16_bits> got = scratch.Download();
    const kernels::QuantMatrix q = pack->View();
    int64_t bad = 0;
    for (int64_t e = 0; e < q.count; ++e) {
      for (int64_t r = 0; r < q.rows; ++r) {
        for (int64_t c = 0; c < q.cols; ++c) {
          bad += got[(e * q.rows + r) * q.cols + c] != kernels::FloatToBf16(kernels::DequantAt(q, e, r, c));
        }
      }
    }
    EXPECT_EQ(bad, 0) << spec->slices[0].name;
  }
  cudaStreamDestroy(stream);
}

// The split prefill (DequantScratch::split, ModelLoadOptions::cuda_quant_prefill_split): a
// prefill-sized LinearMatmul within the decode path's 1e-5 of the float32 product (the rounded
// prefill above is held to 1e-2 only), and the expert stacks split into the scratch as
// hi = bf16(DequantAt), lo = bf16(DequantAt - hi) bit for bit, a scratch one value short refused.
TEST_P(cuda_linear, SplitPrefillKeepsFloat32) {
  SKIP_WITHOUT_GPU();
  Layer0 l = Describe(GetParam());
  ASSERT_NE(l.ckpt, nullptr);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (const WeightSpec* spec : {&l.attention.wqkv, &l.attention.wo}) {
    auto pack = PackQuantWeight(*l.ckpt, *spec);
    ASSERT_TRUE(pack.ok()) << pack.status();
    cuda::LinearWeight w;
    ASSERT_TRUE(w.Upload(*pack).ok());
    DeviceBuffer<kernels::bf16_bits> scratch(2 * w.dequant_elems());
    const cuda::DequantScratch dq{scratch.get(), 2 * w.dequant_elems(), /*split=*/true};
    for (const int64_t T : {int64_t{100}, int64_t{150}}) {
      const std::vector<float> x = kernels::testing::RandomFloats(T * w.cols());
      DeviceBuffer<float> dx(x), dy(T * w.rows());
      dy.Poison();
      ASSERT_TRUE(kernels::UseGemmPath(T, kernels::kGemmMinTokens, stream));
      ASSERT_TRUE(cuda::LinearMatmul(dy.get(), dx.get(), w, T, dq, stream, kernels::kGemmMinTokens).ok());
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      kernels::testing::ExpectClose(GetParam() + " " + spec->slices[0].name + " T=" + std::to_string(T) + " (split)",
                                    dy.Download(), HostProduct(*pack, x, T), 1e-5);
    }
  }
  for (const WeightSpec* spec : {&l.experts.gate_up, &l.experts.down}) {
    auto pack = PackQuantWeight(*l.ckpt, *spec);
    ASSERT_TRUE(pack.ok()) << pack.status();
    cuda::LinearWeight w;
    ASSERT_TRUE(w.Upload(*pack).ok());
    const int64_t n = w.dequant_elems();
    DeviceBuffer<kernels::bf16_bits> scratch(2 * n);
    scratch.Poison();
    EXPECT_FALSE(cuda::DequantizeSplitToScratch(w, cuda::DequantScratch{scratch.get(), 2 * n - 1, true}, stream).ok());
    auto split = cuda::DequantizeSplitToScratch(w, cuda::DequantScratch{scratch.get(), 2 * n, true}, stream);
    ASSERT_TRUE(split.ok()) << split.status();
    EXPECT_EQ(split->hi, scratch.get());
    EXPECT_EQ(split->lo, scratch.get() + n);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<kernels::bf16_bits> got = scratch.Download();
    const kernels::QuantMatrix q = pack->View();
    int64_t bad = 0;
    for (int64_t e = 0; e < q.count; ++e) {
      for (int64_t r = 0; r < q.rows; ++r) {
        for (int64_t c = 0; c < q.cols; ++c) {
          const int64_t i = (e * q.rows + r) * q.cols + c;
          const float v = kernels::DequantAt(q, e, r, c);
          const kernels::bf16_bits hi = kernels::FloatToBf16(v);
          bad += got[i] != hi || got[n + i] != kernels::FloatToBf16(v - kernels::Bf16ToFloat(hi));
        }
      }
    }
    EXPECT_EQ(bad, 0) << spec->slices[0].name;
  }
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, cuda_linear, ::testing::Values("qwen3moe-fp8-tiny", "qwen3moe-nvfp4-tiny"),
                         [](const auto& p) {
                           std::string n = p.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(cuda_linear_random, QuantizedRandomWeightsHaveTheBf16Scale) {
  SKIP_WITHOUT_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  WeightSpec spec;
  spec.shape = {2, 256, 512};  // two experts, fan-in 512: mean square 1 / 512
  for (WeightFormat f : {WeightFormat::kFp8Block, WeightFormat::kNvfp4}) {
    cuda::RandomWeights src(7, stream, f);
    cuda::LinearWeight gate;  // the DeltaNet's b|a: bf16 in every format
    ASSERT_TRUE(src.ReadLinear(spec, gate, /*random_quantized=*/false).ok());
    EXPECT_FALSE(gate.quantized());
    cuda::LinearWeight w;
    ASSERT_TRUE(src.ReadLinear(spec, w).ok());
    ASSERT_EQ(w.format(), f);
    EXPECT_EQ(src.largest_quantized_elems(), 2 * 256 * 512);
    EXPECT_EQ(w.device_bytes(), 2 * w.quant().matrix_bytes());
    DeviceBuffer<kernels::bf16_bits> scratch(w.dequant_elems());
    ASSERT_TRUE(cuda::DequantizeToScratch(w, cuda::DequantScratch{scratch.get(), w.dequant_elems()}, stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<float> v = kernels::testing::Bf16ToFloats(scratch.Download());
    double sq = 0;
    int64_t nonfinite = 0;
    for (float x : v) {
      nonfinite += !std::isfinite(x);
      sq += static_cast<double>(x) * x;
    }
    const double ms = sq / static_cast<double>(v.size());
    std::printf("random %s: mean square %.4g (bf16 random weights: %.4g)\n",
                f == WeightFormat::kFp8Block ? "fp8" : "nvfp4", ms, 1.0 / 512);
    EXPECT_EQ(nonfinite, 0);
    EXPECT_NEAR(ms * 512, 1.0, 0.15);
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace tandem::engine
