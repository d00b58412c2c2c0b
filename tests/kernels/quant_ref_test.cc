// The quantized-weight readers (kernels/quant_weight.h: E4m3ToFloat, E2m1ToFloat, DequantAt) and
// the references of the quantized products (kernels/quant_matmul_ref.cc) on hand-computed values,
// without a GPU: the FP8 and NVFP4 kernels are checked against these references, so a reader that
// indexed a scale wrongly would carry the kernels with it.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/quant_matmul.h"
#include "kernels/quant_moe.h"
#include "kernels/quant_weight.h"
#include "tests/kernels/ref_test_util.h"

namespace tandem::kernels {
namespace {

using testing::ExpectValues;

TEST(quant_ref, E4m3Codes) {
  // S.EEEE.MMM, bias 7: normals (8 + M) * 2^(E - 10), subnormals M * 2^-9.
  EXPECT_EQ(E4m3ToFloat(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(E4m3ToFloat(0x80)));
  EXPECT_EQ(E4m3ToFloat(0x01), 0.001953125f);  // 2^-9, the smallest subnormal
  EXPECT_EQ(E4m3ToFloat(0x07), 0.013671875f);  // 7 * 2^-9, the largest
  EXPECT_EQ(E4m3ToFloat(0x08), 0.015625f);     // 2^-6, the smallest normal
  EXPECT_EQ(E4m3ToFloat(0x38), 1.0f);
  EXPECT_EQ(E4m3ToFloat(0x3c), 1.5f);
  EXPECT_EQ(E4m3ToFloat(0x40), 2.0f);
  EXPECT_EQ(E4m3ToFloat(0x78), 256.0f);  // exponent 15 is finite in e4m3fn
  EXPECT_EQ(E4m3ToFloat(0x7e), 448.0f);  // the largest finite value
  EXPECT_EQ(E4m3ToFloat(0xb8), -1.0f);
  EXPECT_EQ(E4m3ToFloat(0xc4), -3.0f);
  EXPECT_TRUE(std::isnan(E4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(E4m3ToFloat(0xff)));
}

TEST(quant_ref, E2m1Codes) {
  const float want[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(E2m1ToFloat(static_cast<uint8_t>(c)), want[c]) << "code " << c;
  EXPECT_TRUE(std::signbit(E2m1ToFloat(8)));
}

// A 3 x 4 FP8 matrix with 2 x 2 blocks whose shard starts one column into a block (col_phase 1):
// scale columns (c + 1) / 2 = 0, 1, 1, 2 for c = 0..3, scale rows r / 2 = 0, 0, 1.
struct Fp8Fixture {
  std::vector<uint8_t> data = {0x38, 0x40, 0xb8, 0x3c,   // 1, 2, -1, 1.5
                               0x01, 0x7e, 0x00, 0xc4,   // 2^-9, 448, 0, -3
                               0x38, 0x38, 0x38, 0x38};  // 1, 1, 1, 1
  std::vector<float> scales = {0.5f, 2, 4, 0.25f, 8, 16};
  QuantMatrix W;
  Fp8Fixture() {
    W.format = WeightFormat::kFp8Block;
    W.rows = 3, W.cols = 4;
    W.data = data.data();
    W.scales = scales.data();
    W.block_in = 2, W.row_block = 2, W.col_phase = 1;
  }
};

const std::vector<double> kFp8Dequantized = {0.5, 4, -2, 6, 0.0009765625, 896, 0, -12, 0.25, 8, 8, 16};

std::vector<float> AllOf(const QuantMatrix& W, int64_t e) {
  std::vector<float> w;
  for (int64_t r = 0; r < W.rows; ++r) {
    for (int64_t c = 0; c < W.cols; ++c) w.push_back(DequantAt(W, e, r, c));
  }
  return w;
}

TEST(quant_ref, Fp8BlockScalesWithPhase) {
  Fp8Fixture f;
  EXPECT_EQ(f.W.scale_cols(), 3);
  EXPECT_EQ(f.W.scale_rows(), 2);
  ExpectValues(AllOf(f.W, 0), kFp8Dequantized, "fp8 row_block 2, col_phase 1");
}

TEST(quant_ref, Fp8OneScaleRowPerRow) {
  // row_block 1 (a shard cutting a block: the loader repeats the block's scale row), blocks of 4
  // columns starting 2 columns before the shard: scale columns 0, 0, 1, 1.
  const std::vector<uint8_t> data = {0x38, 0x38, 0x38, 0x38, 0x40, 0x40, 0x40, 0x40, 0xb8, 0x38, 0xb8, 0x38};
  const std::vector<float> scales = {1, 2, 3, 4, 5, 6};
  QuantMatrix W;
  W.format = WeightFormat::kFp8Block;
  W.rows = 3, W.cols = 4, W.block_in = 4, W.row_block = 1, W.col_phase = 2;
  W.data = data.data(), W.scales = scales.data();
  EXPECT_EQ(W.scale_cols(), 2);
  EXPECT_EQ(W.scale_rows(), 3);
  ExpectValues(AllOf(W, 0), {1, 1, 2, 2, 6, 6, 8, 8, -5, 5, -6, 6}, "fp8 row_block 1, col_phase 2");
}

// Which FP8 layouts a kernel reading `step` columns at a time can index with a shift
// (QuantMatrix::block_shift: the decode kernels' 16, the batched products' 32, the batched
// experts' 64-wide chunks).
TEST(quant_ref, Fp8BlockShift) {
  QuantMatrix W = QuantMatrix::Layout(WeightFormat::kFp8Block, 1, 256, 768, 128, 128);
  EXPECT_EQ(W.block_shift(16), 7);
  EXPECT_EQ(W.block_shift(64), 7);
  W.col_phase = 32;  // TP 8's down shard: 96 columns starting 32 into a block
  EXPECT_EQ(W.block_shift(32), 7);
  EXPECT_EQ(W.block_shift(64), -1);
  W.block_in = 32, W.col_phase = 0;  // the FP8 fixtures' 32 x 32 blocks
  EXPECT_EQ(W.block_shift(32), 5);
  EXPECT_EQ(W.block_shift(64), -1) << "a block narrower than the step";
  W.block_in = 96;
  EXPECT_EQ(W.block_shift(16), -1) << "not a power of two";
  EXPECT_EQ(QuantMatrix{}.block_shift(16), -1) << "no blocks";
}

TEST(quant_ref, Fp8StackOffsets) {
  // Matrix 1 of a stack starts data_bytes() and scale_stride() into the arrays.
  Fp8Fixture f;
  f.data.insert(f.data.end(), {0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40});
  f.scales.insert(f.scales.end(), {1, 1, 1, 3, 3, 3});
  f.W.count = 2;
  f.W.data = f.data.data(), f.W.scales = f.scales.data();
  EXPECT_EQ(f.W.data_bytes(), 12);
  EXPECT_EQ(f.W.scale_stride(), 6);
  ExpectValues(AllOf(f.W, 0), kFp8Dequantized, "fp8 matrix 0");
  ExpectValues(AllOf(f.W, 1), {2, 2, 2, 2, 2, 2, 2, 2, 6, 6, 6, 6}, "fp8 matrix 1");
}

// A 2 x 32 NVFP4 matrix: the even column in the low nibble, one e4m3 scale per 16 columns, a
// float32 second scale per row; a second matrix behind it.
struct Nvfp4Fixture {
  std::vector<uint8_t> data = std::vector<uint8_t>(2 * 2 * 16, 0);
  std::vector<uint8_t> group_scales = {0x38, 0x40, 0x3c, 0x48,   // 1, 2 | 1.5, 4
                                       0x38, 0x38, 0x38, 0x38};  // matrix 1: all 1
  std::vector<float> row_scale2 = {0.5f, 3, 1, 10};
  QuantMatrix W;
  Nvfp4Fixture() {
    data[0] = 0x21;       // row 0: c0 = 1 (0.5), c1 = 2 (1)
    data[8] = 0xf7;       // row 0: c16 = 7 (6), c17 = 0xf (-6)
    data[16 + 1] = 0x05;  // row 1: c2 = 5 (3), c3 = 0
    data[16 + 15] = 0x9c;  // row 1: c30 = 0xc (-2), c31 = 9 (-0.5)
    data[32 + 16 + 2] = 0x70;  // matrix 1, row 1: c4 = 0, c5 = 7 (6)
    W.format = WeightFormat::kNvfp4;
    W.rows = 2, W.cols = 32, W.count = 2;
    W.data = data.data();
    W.group_scales = group_scales.data();
    W.row_scale2 = row_scale2.data();
  }
};

TEST(quant_ref, Nvfp4NibblesAndScales) {
  Nvfp4Fixture f;
  const QuantMatrix& W = f.W;
  // e2m1 * group scale * row scale 2.
  EXPECT_EQ(DequantAt(W, 0, 0, 0), 0.25f);    // 0.5 * 1 * 0.5
  EXPECT_EQ(DequantAt(W, 0, 0, 1), 0.5f);     // 1 * 1 * 0.5
  EXPECT_EQ(DequantAt(W, 0, 0, 2), 0.0f);
  EXPECT_EQ(DequantAt(W, 0, 0, 16), 6.0f);    // 6 * 2 * 0.5
  EXPECT_EQ(DequantAt(W, 0, 0, 17), -6.0f);   // -6 * 2 * 0.5
  EXPECT_EQ(DequantAt(W, 0, 1, 2), 13.5f);    // 3 * 1.5 * 3
  EXPECT_EQ(DequantAt(W, 0, 1, 3), 0.0f);
  EXPECT_EQ(DequantAt(W, 0, 1, 30), -24.0f);  // -2 * 4 * 3
  EXPECT_EQ(DequantAt(W, 0, 1, 31), -6.0f);   // -0.5 * 4 * 3
  // Matrix 1: data_bytes() = 32, group_scale_stride() = 4, row_scale2_stride() = 2.
  EXPECT_EQ(DequantAt(W, 1, 1, 5), 60.0f);    // 6 * 1 * 10
  EXPECT_EQ(DequantAt(W, 1, 1, 4), 0.0f);
  EXPECT_EQ(DequantAt(W, 1, 0, 0), 0.0f);
}

TEST(quant_ref, MatmulQuantFp8) {
  Fp8Fixture f;
  const std::vector<float> x = {1, 1, 1, 1, 1, -1, 0.5f, 2};
  std::vector<float> y(6);
  ref::matmul_quant(y.data(), x.data(), f.W, 2);
  // Rows (0.5, 4, -2, 6), (2^-10, 896, 0, -12), (0.25, 8, 8, 16).
  ExpectValues(y, {8.5, 884.0009765625, 32.25, 7.5, 0.0009765625 - 896 - 24, 0.25 - 8 + 4 + 32}, "matmul fp8");
}

TEST(quant_ref, MatmulQuantNvfp4) {
  Nvfp4Fixture f;
  f.W.count = 1;
  std::vector<float> x(32, 0.0f);
  x[0] = 1, x[17] = 2, x[30] = 1;
  std::vector<float> y(2);
  ref::matmul_quant(y.data(), x.data(), f.W, 1);
  ExpectValues(y, {0.25 + 2 * -6.0, -24}, "matmul nvfp4");
}

TEST(quant_ref, DequantizeBf16RoundsToNearestEven) {
  // Scale 1 + 2^-8: 1 * s lies exactly between two bf16 values (1 and 1 + 2^-7) and rounds to the
  // even one (1); 1.5 * s = 1.5 + 1.5 * 2^-8 is nearer 1.5 + 2^-7 and rounds up.
  const std::vector<uint8_t> data = {0x38, 0x3c};
  const std::vector<float> scales = {1.00390625f};
  QuantMatrix W;
  W.format = WeightFormat::kFp8Block;
  W.rows = 1, W.cols = 2, W.block_in = 2, W.row_block = 1;
  W.data = data.data(), W.scales = scales.data();
  std::vector<bf16_bits> out(2);
  ref::dequantize_bf16(out.data(), W);
  EXPECT_EQ(out[0], 0x3f80);  // 1.0
  EXPECT_EQ(out[1], 0x3fc1);  // 1.5078125
  Fp8Fixture f;
  std::vector<bf16_bits> all(12);
  ref::dequantize_bf16(all.data(), f.W);
  std::vector<float> back;
  for (bf16_bits b : all) back.push_back(Bf16ToFloat(b));
  ExpectValues(back, kFp8Dequantized, "dequantize fp8 (every value exact in bf16)");
}

// The split form (lo = bf16(W - hi), the float32-grade prefill's weights): with scale 1 + 2^-8,
// 1 * s = 1 + 2^-8 splits into hi 1 and lo 2^-8; 1.5 * s = 1.505859375 into hi 1.5078125 and
// lo -2^-9; both sums are exact. Weights exact in bf16 have lo 0.
TEST(quant_ref, DequantizeBf16SplitsTheRemainder) {
  const std::vector<uint8_t> data = {0x38, 0x3c};
  const std::vector<float> scales = {1.00390625f};
  QuantMatrix W;
  W.format = WeightFormat::kFp8Block;
  W.rows = 1, W.cols = 2, W.block_in = 2, W.row_block = 1;
  W.data = data.data(), W.scales = scales.data();
  std::vector<bf16_bits> hi(2), lo(2);
  ref::dequantize_bf16(hi.data(), W, lo.data());
  EXPECT_EQ(hi[0], 0x3f80);  // 1.0
  EXPECT_EQ(lo[0], 0x3b80);  // 2^-8
  EXPECT_EQ(hi[1], 0x3fc1);  // 1.5078125
  EXPECT_EQ(lo[1], 0xbb00);  // -2^-9
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(Bf16ToFloat(hi[c]) + Bf16ToFloat(lo[c]), DequantAt(W, 0, 0, c)) << "column " << c;
  }
  Fp8Fixture f;
  std::vector<bf16_bits> all(12), rest(12, 0xffff);
  ref::dequantize_bf16(all.data(), f.W, rest.data());
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i] & 0x7fff, 0) << "value " << i << " is exact in bf16";
}

// Two experts of H = 2, I = 1 (gate row 0, up row 1), one scale per expert matrix.
TEST(quant_ref, MoeQuantFp8) {
  const std::vector<uint8_t> gu_data = {0x38, 0x38, 0x40, 0x38,   // expert 0: gate (1, 1), up (2, 1)
                                        0x38, 0xb8, 0x38, 0x38};  // expert 1: gate (1, -1), up (1, 1)
  const std::vector<float> gu_scales = {1, 0.5f};
  QuantMatrix gate_up;
  gate_up.format = WeightFormat::kFp8Block;
  gate_up.rows = 2, gate_up.cols = 2, gate_up.count = 2, gate_up.block_in = 2, gate_up.row_block = 2;
  gate_up.data = gu_data.data(), gate_up.scales = gu_scales.data();
  const std::vector<float> x = {1, 2};
  const std::vector<int32_t> ids = {1, 0};  // T = 1, K = 2
  std::vector<float> act(2);
  ref::moe_gate_up_quant(act.data(), x.data(), ids.data(), gate_up, 1, 2);
  // Expert 1: gate 0.5 * (1 - 2) = -0.5, up 0.5 * 3 = 1.5; expert 0: gate 3, up 4.
  const auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  ExpectValues(act, {silu(-0.5) * 1.5, silu(3) * 4}, "moe_gate_up fp8");

  // down (H = 2, I = 1), a scale per row: expert 0 rows (1, 0.5), expert 1 rows (-2, 4).
  const std::vector<uint8_t> d_data = {0x38, 0x40, 0xb8, 0x38};
  const std::vector<float> d_scales = {1, 0.25f, 2, 4};
  QuantMatrix down;
  down.format = WeightFormat::kFp8Block;
  down.rows = 2, down.cols = 1, down.count = 2, down.block_in = 1, down.row_block = 1;
  down.data = d_data.data(), down.scales = d_scales.data();
  const std::vector<float> a = {2, -1}, weights = {0.25f, 0.75f};
  std::vector<float> out(2);
  ref::moe_down_quant(out.data(), a.data(), ids.data(), weights.data(), down, 1, 2);
  // 0.25 * 2 * W1 + 0.75 * -1 * W0.
  ExpectValues(out, {0.25 * 2 * -2 - 0.75 * 1, 0.25 * 2 * 4 - 0.75 * 0.5}, "moe_down fp8");
}

}  // namespace
}  // namespace tandem::kernels
