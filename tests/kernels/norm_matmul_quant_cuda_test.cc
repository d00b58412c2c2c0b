// The residual add + RMSNorm fused into the one-token quantized products (kernels/norm_matmul.h
// add_rmsnorm_matmul_quant) against their CPU reference (ref::add_rmsnorm then ref::matmul_quant),
// FP8 and NVFP4, each through the CUDA-core split kernels and the tensor-core kernels (token_mma),
// with and without the residual's delta, with and without xn kept, plain and zero-centred norms.
// Shapes: Qwen3-30B-A3B's q/k/v at batch 1 (5120 x 2048), rows that end inside a block, FP8 shards
// starting inside a scale block and 32-blocks, the widest row the fused kernels take (4096), and
// the layouts they decline (FP8's per-element scales, NVFP4 rows of cols % 32 == 16, rows past 4096
// columns), where nothing may be launched: the caller runs the two kernels instead.
//
// Bounds: the residual x_in + delta is one float32 addition, the same in the reference: equal bit
// for bit. xn (the same float32 terms summed in another order, rsqrtf's 2 ulp) and y: 1e-5
// relative, the bound of the bf16 fused product's test (kernels_cuda_test) and of the quantized
// products (quant_fp8_cuda_test.cc has the arithmetic), which any wrong weight, scale, row or normed
// value exceeds.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/norm_matmul.h"
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
using testing::RandomFp8;
using testing::SameBits;
using testing::Shape;

constexpr double kBound = 1e-5;
constexpr float kEps = 1e-6f;

// One variant of the fused norm's inputs.
struct NormVariant {
  bool delta = false;
  bool keep_xn = false;
  float w_offset = 0.0f;
  std::string Describe() const {
    return std::string(delta ? " +delta" : "") + (keep_xn ? " xn" : "") + (w_offset != 0.0f ? " zero-centred" : "");
  }
};

const std::vector<NormVariant> kVariants = {{true, false, 0.0f}, {false, true, 0.0f}, {true, true, 1.0f}};

// Runs the fused product of W (host and device descriptors) for every variant and both kernel
// families; `takes`: whether the fused kernels take W. Where they do, y, the residual and xn must
// match the reference; where they do not, the call must return false and leave every output alone.
void CheckFused(const QuantMatrix& host, const QuantMatrix& device, bool takes, const std::string& what) {
  const int64_t cols = host.cols, rows = host.rows;
  for (const NormVariant& v : kVariants) {
    const std::vector<float> x_in = RandomFloats(cols), delta = RandomFloats(cols, 0.5f);
    // Zero-centred norms store w near 0 (the kernels add the 1); plain ones near 1.
    std::vector<bf16_bits> norm_w = RandomBf16(cols, 0.2f);
    if (v.w_offset == 0.0f) {
      for (auto& w : norm_w) w = FloatToBf16(1.0f + Bf16ToFloat(w));
    }
    RowNorm ref_norm;
    std::vector<float> want_y(rows), want_r(cols), want_xn(cols);
    ref_norm.x_out = want_r.data();
    ref_norm.xn_out = want_xn.data();
    ref_norm.x_in = x_in.data();
    ref_norm.delta = v.delta ? delta.data() : nullptr;
    ref_norm.norm_w = norm_w.data();
    ref_norm.eps = kEps;
    ref_norm.w_offset = v.w_offset;
    ref::add_rmsnorm_matmul_quant(want_y.data(), ref_norm, host);

    DeviceBuffer<float> d_x(x_in), d_delta(delta), d_y(rows), d_r(cols), d_xn(cols);
    DeviceBuffer<bf16_bits> d_nw(norm_w);
    RowNorm n = ref_norm;
    n.x_out = d_r.get();
    n.xn_out = v.keep_xn ? d_xn.get() : nullptr;
    n.x_in = d_x.get();
    n.delta = v.delta ? d_delta.get() : nullptr;
    n.norm_w = d_nw.get();
    for (const bool token_mma : {false, true}) {
      const std::string tag = "norm_matmul " + what + v.Describe() + (token_mma ? " token_mma" : "");
      d_y.Poison();
      d_r.Poison();
      d_xn.Poison();
      const std::vector<float> poison = d_y.Download(), poison_row = d_r.Download();
      const bool launched = add_rmsnorm_matmul_quant(d_y.get(), n, device, nullptr, token_mma);
      CUDA_CHECK(cudaDeviceSynchronize());
      ASSERT_EQ(launched, takes) << tag;
      if (!takes) {
        EXPECT_TRUE(SameBits(d_y.Download(), poison)) << tag << ": declined, yet y was written";
        EXPECT_TRUE(SameBits(d_r.Download(), poison_row)) << tag << ": declined, yet the residual was written";
        continue;
      }
      ExpectClose(tag + " y", d_y.Download(), want_y, kBound);
      EXPECT_TRUE(SameBits(d_r.Download(), want_r)) << tag << ": the residual is one float32 addition";
      if (v.keep_xn) {
        ExpectClose(tag + " xn", d_xn.Download(), want_xn, kBound);
      } else {
        EXPECT_TRUE(SameBits(d_xn.Download(), poison_row)) << tag << ": xn written though not asked for";
      }
    }
  }
}

TEST(norm_matmul_quant_cuda, Fp8) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Fp8Case w;
    bool takes;
  };
  const std::vector<Case> cases = {
      {{1, 5120, 2048}, true},                          // Qwen3-30B-A3B's q/k/v, 128 x 128 blocks
      {{1, 1536, 2048, 128, 128, true}, true},          // a scale row per row (a TP shard)
      {{1, 200, 1024, 128, 128, false, 64}, true},      // rows ending inside a block, a shard 64 in
      {{1, 100, 512, 32, 32, true, 16}, true},          // 32-blocks, 16 columns in
      {{1, 77, 4096}, true},                            // the widest row the fused kernels take
      {{1, 70, 160, 32, 32, false, 8}, false},          // loads straddling blocks: per-element scales
      {{1, 16, 4096 + 128}, false},                     // past 24 KB of shared memory
  };
  for (const Case& c : cases) {
    const auto W = RandomFp8(c.w);
    CheckFused(W->host, W->device, c.takes, "fp8 " + testing::Describe(c.w));
  }
}

TEST(norm_matmul_quant_cuda, Nvfp4) {
  SKIP_WITHOUT_GPU();
  // (rows, cols, takes): q/k/v; rows of a partial 16-row group; 1056 columns (the tensor-core
  // kernels' last chunk partial); 4096 columns; 48 (cols % 32 == 16: 8-byte loads, declined); 4224.
  for (auto [rows, cols, takes] : std::vector<std::tuple<int64_t, int64_t, bool>>{{5120, 2048, true},
                                                                                  {130, 2048, true},
                                                                                  {70, 1056, true},
                                                                                  {33, 4096, true},
                                                                                  {37, 48, false},
                                                                                  {16, 4224, false}}) {
    Nvfp4Stack W(1, rows, cols);
    CheckFused(W.host, W.device, takes, "nvfp4 " + Shape({rows, cols}));
  }
}

}  // namespace
}  // namespace tandem::kernels
