// NVFP4 weights (engine/model/nvfp4.h): the e2m1 code table, slices of a packed weight (plain and
// of a fused stack) dequantized with each element's group scale, and the refusals: a column slice
// off the 16-groups, a scale or weight of the wrong shape or dtype, a U8 weight without scales.
#include "engine/model/nvfp4.h"

#include <cmath>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/model/safetensors.h"
#include "tests/engine/model/test_util.h"

namespace tandem::engine {
namespace {

TEST(Nvfp4, E2m1Table) {
  const float want[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(E2m1ToFloat(static_cast<uint8_t>(c)), want[c]) << "code " << c;
    EXPECT_EQ(std::signbit(E2m1ToFloat(static_cast<uint8_t>(c))), c >= 8) << "code " << c;
  }
}

// A [3, 48] weight (3 groups of 16 inputs per row), and a stack of two with one scale_2 each.
struct Fixture {
  static constexpr int64_t kOut = 3, kIn = 48;
  static uint8_t Code(int64_t e, int64_t o, int64_t i) { return static_cast<uint8_t>((e * 7 + o * 5 + i * 3) % 16); }
  // Positive e4m3 codes that differ per group (0x30 = 0.5 .. 0x4f = 7.5).
  static uint8_t Group(int64_t e, int64_t o, int64_t g) { return static_cast<uint8_t>(0x30 + (e * 9 + o * 3 + g) % 0x20); }
  static float Scale2(int64_t e) { return e == 0 ? 0.25f : 3.0f; }
  static float Want(int64_t e, int64_t o, int64_t i) {
    return E2m1ToFloat(Code(e, o, i)) * F8E4M3ToFloat(Group(e, o, i / 16)) * Scale2(e);
  }

  // The weight, its two scales; experts = 0 for a plain matrix.
  static std::vector<NamedTensorData> Tensors(const std::string& name, int64_t experts) {
    const int64_t n = std::max<int64_t>(experts, 1);
    NamedTensorData w{name, DType::kU8, {kOut, kIn / 2}, {}, {}, {}};
    NamedTensorData g{WeightScaleName(name), DType::kF8E4M3, {kOut, kIn / 16}, {}, {}, {}};
    NamedTensorData g2{WeightScale2Name(name), DType::kF32, {}, {}, {}, {}};
    if (experts > 0) {
      w.shape.insert(w.shape.begin(), experts);
      g.shape.insert(g.shape.begin(), experts);
      g2.shape = {experts};
    }
    for (int64_t e = 0; e < n; ++e) {
      g2.floats.push_back(Scale2(e));
      for (int64_t o = 0; o < kOut; ++o) {
        for (int64_t i = 0; i < kIn; i += 2) w.raw.push_back(static_cast<char>(Code(e, o, i) | (Code(e, o, i + 1) << 4)));
        for (int64_t k = 0; k < kIn / 16; ++k) g.raw.push_back(static_cast<char>(Group(e, o, k)));
      }
    }
    return {w, g, g2};
  }
};

WeightSlice Slice(std::string name, std::vector<int64_t> shape, int dim, int64_t start, int64_t len,
                  int64_t index = -1) {
  return WeightSlice{std::move(name), std::move(shape), dim, start, len, index};
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Write(const testing::TempDir& dir, std::vector<NamedTensorData> tensors) {
  RETURN_IF_ERROR(WriteSafetensors(dir / "model.safetensors", tensors));
  return Checkpoint::Open(dir.path());
}

TEST(Nvfp4, SlicesKeepEachElementsGroupScale) {
  using F = Fixture;
  testing::TempDir dir;
  std::vector<NamedTensorData> t = F::Tensors("m.weight", 0);
  for (NamedTensorData& s : F::Tensors("m.experts.down_proj", 2)) t.push_back(s);
  auto ckpt = Write(dir, t);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  using C = testing::SliceCase;
  for (const C& c : {C{0, 0, F::kOut, -1}, C{0, 1, 1, -1}, C{1, 16, 16, -1}, C{1, 16, 32, -1}, C{1, 0, 2, 1},
                     C{2, 0, 48, 1}, C{2, 32, 16, 0}, C{1, 2, 1, 0}}) {
    const WeightSlice s = testing::CaseSlice(c, "m.weight", "m.experts.down_proj", 2, F::kOut, F::kIn);
    auto r = ReadWeightSlice(**ckpt, s);
    ASSERT_TRUE(r.ok()) << r.status();
    const int mdim = c.dim - (c.index >= 0 ? 1 : 0);
    EXPECT_EQ(r->shape, (std::vector<int64_t>{mdim == 0 ? c.len : F::kOut, mdim == 1 ? c.len : F::kIn}));
    testing::ExpectSliceValues(*r, s, F::Want);
  }
}

TEST(Nvfp4, Refusals) {
  using F = Fixture;
  testing::TempDir dir;
  std::vector<NamedTensorData> t = F::Tensors("ok.weight", 0);
  std::vector<NamedTensorData> bad_scale = F::Tensors("bad.weight", 0);
  bad_scale[1].shape = {F::kOut * F::kIn / 16};  // flattened group scales
  std::vector<NamedTensorData> bad_dtype = F::Tensors("f32.weight", 0);
  bad_dtype[1].dtype = DType::kU8;  // group scales stored as U8, not F8_E4M3
  std::vector<NamedTensorData> alone = F::Tensors("alone.weight", 0);
  for (auto* v : {&bad_scale, &bad_dtype}) t.insert(t.end(), v->begin(), v->end());
  t.push_back(alone[0]);  // a packed weight without its scales
  auto ckpt = Write(dir, t);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::vector<int64_t> shape = {F::kOut, F::kIn};

  auto off = ReadWeightSlice(**ckpt, Slice("ok.weight", shape, 1, 8, 16));
  EXPECT_EQ(off.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(testing::Msg(off.status()).find("tensor 'ok.weight': NVFP4 columns [8, 24) do not fall on groups of 16"),
            std::string::npos) << off.status();
  auto odd = ReadWeightSlice(**ckpt, Slice("ok.weight", shape, 1, 16, 8));
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument) << odd.status();
  // The described [out, in] must be twice the stored packed columns.
  auto wide = ReadWeightSlice(**ckpt, Slice("ok.weight", {F::kOut, 2 * F::kIn}, 0, 0, 1));
  EXPECT_NE(testing::Msg(wide.status()).find("tensor 'ok.weight': expected U8 [3, 48] (NVFP4 over 'ok.weight' [3, 96]), found U8 [3, 24]"),
            std::string::npos) << wide.status();
  auto notgroup = ReadWeightSlice(**ckpt, Slice("ok.weight", {F::kOut, 40}, 0, 0, 1));
  EXPECT_NE(testing::Msg(notgroup.status()).find("a multiple of 16"), std::string::npos) << notgroup.status();
  auto bs = ReadWeightSlice(**ckpt, Slice("bad.weight", shape, 0, 0, 1));
  EXPECT_NE(testing::Msg(bs.status()).find("tensor 'bad.weight_scale': expected F8_E4M3 [3, 3] (NVFP4 over 'bad.weight' [3, 48]), found F8_E4M3 [9]"),
            std::string::npos) << bs.status();
  auto bd = ReadWeightSlice(**ckpt, Slice("f32.weight", shape, 0, 0, 1));
  EXPECT_NE(testing::Msg(bd.status()).find("tensor 'f32.weight_scale': expected F8_E4M3 [3, 3]"), std::string::npos)
      << bd.status();
  // Without its scales a U8 tensor is not a weight: its bytes are never read as values.
  auto lone = ReadWeightSlice(**ckpt, Slice("alone.weight", {F::kOut, F::kIn / 2}, 0, 0, 1));
  EXPECT_EQ(lone.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(testing::Msg(lone.status()).find("'alone.weight'"), std::string::npos) << lone.status();
}

}  // namespace
}  // namespace tandem::engine
