// Quantized weights packed for the GPU (engine/model/quant_pack.h): for every quantized weight of
// the FP8 and NVFP4 fixtures on every rank at TP 1, 2 and 4, and for the combined weights the cuda
// backend reads in one product, the packed arrays dequantize (kernels' DequantAt) to exactly the
// floats ReadWeightSlice gives; and the refusals name their tensors.
#include "engine/model/quant_pack.h"

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/model/weight_names.h"
#include "tests/engine/model/test_util.h"

namespace tandem::engine {
namespace {

using kernels::WeightFormat;

// The weights a rank's cuda model reads: every spec, and the combinations packed as one weight.
std::vector<WeightSpec> PackedSpecs(const ModelWeightSpec& m) {
  std::vector<WeightSpec> out;
  for (const WeightSpec* w : testing::AllSpecs(m)) out.push_back(*w);
  for (const LayerWeightSpec& l : m.layers) {
    if (!l.linear && !l.attention.gate.slices.empty()) out.push_back(AppendSpec(l.attention.wqkv, l.attention.gate));
    if (l.linear) {
      out.push_back(AppendSpec(l.linear_attention.in_qkv, l.linear_attention.in_z));
      out.push_back(AppendSpec(l.linear_attention.in_b, l.linear_attention.in_a));
    }
    if (l.moe && l.experts.shared) {
      out.push_back(AppendSpec(l.experts.gate_up, l.experts.shared_expert.gate_up));
      out.push_back(AppendSpec(l.experts.down, l.experts.shared_expert.down));
    }
  }
  return out;
}

struct Fixture {
  const char* dir;
  WeightFormat format;
};

// ctest lists the fixture by its folder.
void PrintTo(const Fixture& f, std::ostream* os) { *os << f.dir; }

class QuantPackFixtures : public ::testing::TestWithParam<Fixture> {};

TEST_P(QuantPackFixtures, DequantizesToReadWeightSliceExactly) {
  const Fixture f = GetParam();
  auto config = LoadModelConfig(testing::TestData(f.dir));
  ASSERT_TRUE(config.ok()) << config.status();
  auto ckpt = Checkpoint::Open(testing::TestData(f.dir));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto names = ResolveWeightNames(**ckpt, *config);
  ASSERT_TRUE(names.ok()) << names.status();
  for (int tp : {1, 2, 4}) {
    ASSERT_TRUE(CheckTpShard(*config, tp).ok()) << f.dir << " tp " << tp;
    int64_t quantized = 0, block_rows = 0, repeated_rows = 0;
    for (int rank = 0; rank < tp; ++rank) {
      const ModelWeightSpec m = DescribeWeights(*names, *config, ComputeTpShard(*config, rank, tp));
      for (const WeightSpec& w : PackedSpecs(m)) {
        const std::string where = std::string(f.dir) + " tp " + std::to_string(tp) + " rank " +
                                  std::to_string(rank) + " " + (w.slices.empty() ? "" : w.slices[0].name);
        auto p = PackQuantWeight(**ckpt, w);
        ASSERT_TRUE(p.ok()) << where << ": " << p.status();
        if (p->format == WeightFormat::kBf16) continue;
        ++quantized;
        EXPECT_EQ(p->format, f.format) << where;
        auto want = testing::ReadSpec(**ckpt, w);
        ASSERT_TRUE(want.ok()) << where << ": " << want.status();
        const kernels::QuantMatrix q = p->View();
        ASSERT_EQ(q.count * q.rows * q.cols, w.numel()) << where;
        // The arrays hold exactly what the descriptor indexes: device bytes = matrix_bytes per matrix.
        const int64_t bytes = static_cast<int64_t>(p->data.size() + 4 * p->scales.size() + p->group_scales.size() +
                                                   4 * p->row_scale2.size());
        EXPECT_EQ(bytes, q.count * q.matrix_bytes()) << where;
        if (q.format == WeightFormat::kFp8Block) (q.row_block > 1 ? block_rows : repeated_rows)++;
        int64_t bad = 0;
        for (int64_t e = 0; e < q.count; ++e) {
          for (int64_t r = 0; r < q.rows; ++r) {
            for (int64_t c = 0; c < q.cols; ++c) {
              const float got = kernels::DequantAt(q, e, r, c);
              const float exp = (*want)[(e * q.rows + r) * q.cols + c];
              if (std::memcmp(&got, &exp, sizeof(float)) != 0 && bad++ < 3) {
                ADD_FAILURE() << where << " [" << e << ", " << r << ", " << c << "]: " << got << " != " << exp;
              }
            }
          }
        }
        EXPECT_EQ(bad, 0) << where;
      }
    }
    EXPECT_GT(quantized, 0) << f.dir << " tp " << tp;
    if (f.format == WeightFormat::kFp8Block) {
      // Whole blocks per slice keep one scale row per block; at TP 4 the experts' 16-row slices of
      // 32-row blocks repeat the scale rows.
      EXPECT_GT(block_rows, 0) << f.dir << " tp " << tp;
      if (tp == 4) {
        EXPECT_GT(repeated_rows, 0) << f.dir;
      }
    }
    std::printf("  %s tp %d: %lld quantized weights packed\n", f.dir, tp, static_cast<long long>(quantized));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantPackFixtures,
                         ::testing::Values(Fixture{"qwen3moe-fp8-tiny", WeightFormat::kFp8Block},
                                           Fixture{"qwen3moe-nvfp4-tiny", WeightFormat::kNvfp4},
                                           Fixture{"qwen35moe-fp8-tiny", WeightFormat::kFp8Block}),
                         [](const auto& info) {
                           std::string n = info.param.dir;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const char* dir) { return Checkpoint::Open(testing::TestData(dir)); }

TEST(QuantPack, BfloatSpecIsNotQuantized) {
  auto ckpt = Open("qwen3moe-fp8-tiny");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  WeightSpec router;
  router.shape = {16, 128};
  router.slices = {WeightSlice{"model.layers.0.mlp.gate.weight", {16, 128}, 0, 0, 16}};
  auto p = PackQuantWeight(**ckpt, router);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->format, WeightFormat::kBf16);
  EXPECT_TRUE(p->data.empty());
}

// Qwen's FP8 DeltaNet keeps in_proj_b/a in bf16: packed with the FP8 in_proj_qkv they are refused,
// naming both tensors.
TEST(QuantPack, MixedFormatsAreRefusedNamingBoth) {
  auto ckpt = Open("qwen35moe-fp8-tiny");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::string qkv = "model.layers.0.linear_attn.in_proj_qkv.weight", b = "model.layers.0.linear_attn.in_proj_b.weight";
  WeightSpec w;
  w.shape = {520, 128};
  w.slices = {WeightSlice{qkv, {512, 128}, 0, 0, 512, -1, 32, 32}, WeightSlice{b, {8, 128}, 0, 0, 8, -1, 32, 32}};
  auto p = PackQuantWeight(**ckpt, w);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(testing::Msg(p.status()).find(qkv), std::string::npos) << p.status();
  EXPECT_NE(testing::Msg(p.status()).find(b), std::string::npos) << p.status();
}

TEST(QuantPack, Nvfp4ColumnsOffAGroupAreRefused) {
  auto ckpt = Open("qwen3moe-nvfp4-tiny");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::string o = "model.layers.0.self_attn.o_proj.weight";  // [128, 256]
  WeightSpec w;
  w.shape = {128, 112};
  w.slices = {WeightSlice{o, {128, 256}, 1, 8, 112}};
  auto p = PackQuantWeight(**ckpt, w);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(testing::Msg(p.status()).find(o), std::string::npos) << p.status();
  EXPECT_NE(testing::Msg(p.status()).find("groups of 16"), std::string::npos) << p.status();
}

// FP8 column slices must share their offset inside a block (one col_phase per weight).
TEST(QuantPack, Fp8ColumnPhasesMustAgree) {
  auto ckpt = Open("qwen3moe-fp8-tiny");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::string d0 = "model.layers.0.mlp.experts.0.down_proj.weight", d1 = "model.layers.0.mlp.experts.1.down_proj.weight";
  WeightSpec w;
  w.shape = {2, 128, 16};
  w.slices = {WeightSlice{d0, {128, 64}, 1, 0, 16, -1, 32, 32}, WeightSlice{d1, {128, 64}, 1, 8, 16, -1, 32, 32}};
  auto p = PackQuantWeight(**ckpt, w);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(testing::Msg(p.status()).find(d1), std::string::npos) << p.status();
}

// A checkpoint whose one tensor reports another shape (a scale of the wrong shape).
class ReshapedCheckpoint final : public Checkpoint {
 public:
  ReshapedCheckpoint(const Checkpoint& inner, std::string name, std::vector<int64_t> shape)
      : inner_(inner), name_(std::move(name)), shape_(std::move(shape)) {}
  bool Has(const std::string& n) const override { return inner_.Has(n); }
  absl::StatusOr<std::vector<int64_t>> Shape(const std::string& n) const override {
    return n == name_ ? absl::StatusOr<std::vector<int64_t>>(shape_) : inner_.Shape(n);
  }
  absl::StatusOr<Tensor> Read(const std::string& n, const std::vector<int64_t>& s) const override {
    return inner_.Read(n, s);
  }
  absl::StatusOr<Tensor> ReadSlice(const std::string& n, const std::vector<int64_t>& s, int dim, int64_t start,
                                   int64_t len) const override {
    return inner_.ReadSlice(n, s, dim, start, len);
  }
  std::vector<std::string> Names() const override { return inner_.Names(); }
  absl::StatusOr<TensorView> View(const std::string& n) const override {
    absl::StatusOr<TensorView> v = inner_.View(n);
    if (v.ok() && n == name_) v->shape = shape_;
    return v;
  }

 private:
  const Checkpoint& inner_;
  std::string name_;
  std::vector<int64_t> shape_;
};

TEST(QuantPack, ScaleOfTheWrongShapeIsRefusedNamingIt) {
  auto ckpt = Open("qwen3moe-fp8-tiny");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  WeightSpec w;
  w.shape = {256, 128};
  w.slices = {WeightSlice{q, {256, 128}, 0, 0, 256, -1, 32, 32}};
  ReshapedCheckpoint bad(**ckpt, q + "_scale_inv", {4, 4});
  auto p = PackQuantWeight(bad, w);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(testing::Msg(p.status()).find(q + "_scale_inv"), std::string::npos) << p.status();

  auto nv = Open("qwen3moe-nvfp4-tiny");
  ASSERT_TRUE(nv.ok()) << nv.status();
  ReshapedCheckpoint bad_group(**nv, q + "_scale", {256, 4});
  w.slices[0].block_out = w.slices[0].block_in = 0;
  p = PackQuantWeight(bad_group, w);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(testing::Msg(p.status()).find(q + "_scale"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace tandem::engine
