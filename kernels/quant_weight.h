// Quantized weight matrices as the GPU kernels read them: one rank's shard of a linear (or a stack
// of E experts), kept in the checkpoint's own format in device memory and dequantized in registers.
// Plain C++ (no CUDA headers): the CPU references, the loaders and the tests share it.
//
// Formats (../shared/testdata/README.md has the checkpoint side):
//   kFp8Block  block-scaled FP8 (Qwen's -FP8 releases): one e4m3fn byte per weight, a float32 scale
//              per (block_out x block_in) block. A tensor-parallel shard may start inside a block, so
//              the rank's layout keeps the checkpoint's scales but indexes them from the shard:
//                W[r][c] = e4m3(data[r * cols + c]) * scales[(r / row_block) * scale_cols
//                                                          + (c + col_phase) / block_in]
//              row_block is block_out when every packed row slice starts on a block boundary (and
//              all but the last end on one), else 1 (one scale row per weight row: the loader then
//              repeats a block's scale row for each of its rows); col_phase is the shard's first
//              column modulo block_in; scale_cols = ceil((col_phase + cols) / block_in).
//   kNvfp4     NVIDIA ModelOpt NVFP4: two e2m1 codes per byte (the even column in the low nibble),
//              an e4m3fn scale per 16 consecutive columns, and a float32 second-level scale per
//              row (weight_scale_2 of the tensor the row came from, so rows packed from q_proj,
//              k_proj and v_proj each keep their own):
//                W[r][c] = e2m1(nibble(data[r * cols / 2 + c / 2], c % 2))
//                          * e4m3(group_scales[r * cols / 16 + c / 16]) * row_scale2[r]
//              cols % 16 == 0 (a shard splits on 16-column groups).
//   kBf16      plain bf16 [rows, cols] (data only), so one descriptor covers every linear.
// A stack of `count` matrices (MoE experts) lays each array out as `count` equal matrices back to
// back: matrix e starts at e * MatrixBytes() / ScaleCount() / ... (the *_stride helpers below).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace tandem::kernels {

enum class WeightFormat : uint8_t { kBf16 = 0, kFp8Block = 1, kNvfp4 = 2 };

inline constexpr int64_t kNvfp4GroupSize = 16;

struct QuantMatrix {
  WeightFormat format = WeightFormat::kBf16;
  int64_t rows = 0, cols = 0;   // of one matrix
  int64_t count = 1;            // matrices in the stack (experts), 1 for a plain linear
  const void* data = nullptr;   // bf16 / e4m3 bytes / packed e2m1 pairs
  // kFp8Block
  const float* scales = nullptr;
  int64_t block_in = 0, row_block = 1, col_phase = 0;
  // kNvfp4
  const uint8_t* group_scales = nullptr;  // e4m3fn, rows * cols / 16 per matrix
  const float* row_scale2 = nullptr;      // rows per matrix

  // A stack of `count` (rows x cols) matrices in `format`, its arrays not set yet; FP8 takes its
  // block size (block_in columns, row_block rows; col_phase 0: the shard starts on a block).
  static QuantMatrix Layout(WeightFormat format, int64_t count, int64_t rows, int64_t cols, int64_t block_in = 0,
                            int64_t row_block = 1) {
    QuantMatrix q;
    q.format = format;
    q.count = count;
    q.rows = rows;
    q.cols = cols;
    if (format == WeightFormat::kFp8Block) {
      q.block_in = block_in;
      q.row_block = row_block;
    }
    return q;
  }

  int64_t scale_cols() const { return block_in > 0 ? (col_phase + cols + block_in - 1) / block_in : 0; }
  // log2(block_in) when every scale block covers whole runs of `step` columns of this matrix
  // (block_in a power of two >= step, col_phase % step == 0): a kernel reading `step` columns at a
  // time then finds a run's scale with a shift. Else -1.
  int32_t block_shift(int64_t step) const {
    if (block_in < step || (block_in & (block_in - 1)) != 0 || col_phase % step != 0) return -1;
    int32_t shift = 0;
    while ((int64_t{1} << shift) < block_in) ++shift;
    return shift;
  }
  int64_t scale_rows() const { return row_block > 0 ? (rows + row_block - 1) / row_block : 0; }
  // Per-matrix strides of each array, in its own elements.
  int64_t data_bytes() const {
    return format == WeightFormat::kBf16 ? rows * cols * 2 : format == WeightFormat::kFp8Block ? rows * cols : rows * cols / 2;
  }
  int64_t scale_stride() const { return format == WeightFormat::kFp8Block ? scale_rows() * scale_cols() : 0; }
  int64_t group_scale_stride() const { return format == WeightFormat::kNvfp4 ? rows * cols / kNvfp4GroupSize : 0; }
  int64_t row_scale2_stride() const { return format == WeightFormat::kNvfp4 ? rows : 0; }
  // Bytes one matrix occupies in device memory (data and every scale array).
  int64_t matrix_bytes() const {
    return data_bytes() + scale_stride() * 4 + group_scale_stride() + row_scale2_stride() * 4;
  }
};

// e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN (the
// largest finite magnitude is 448). Every value is exact in float32.
inline float E4m3ToFloat(uint8_t bits) {
  const bool neg = (bits & 0x80) != 0;
  const int exp = (bits >> 3) & 0xf;
  const int mant = bits & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  // Subnormals (exp 0): mant * 2^-9; normals: (8 + mant) * 2^(exp - 10).
  const float f = exp == 0 ? std::ldexp(static_cast<float>(mant), -9) : std::ldexp(static_cast<float>(8 + mant), exp - 10);
  return neg ? -f : f;
}

// e2m1 (4 bits): sign = bit 3, magnitude = {0, 0.5, 1, 1.5, 2, 3, 4, 6}[code & 7].
inline float E2m1ToFloat(uint8_t code) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[code & 7];
  return (code & 8) != 0 ? -m : m;
}

// Element (r, c) of matrix e of a stack, dequantized to float32 (the references' and tests' reader;
// data of a kBf16 matrix is read as bf16).
inline float DequantAt(const QuantMatrix& W, int64_t e, int64_t r, int64_t c) {
  switch (W.format) {
    case WeightFormat::kFp8Block: {
      const uint8_t* d = static_cast<const uint8_t*>(W.data) + e * W.data_bytes();
      const float* s = W.scales + e * W.scale_stride();
      return E4m3ToFloat(d[r * W.cols + c]) * s[(r / W.row_block) * W.scale_cols() + (c + W.col_phase) / W.block_in];
    }
    case WeightFormat::kNvfp4: {
      const uint8_t* d = static_cast<const uint8_t*>(W.data) + e * W.data_bytes();
      const uint8_t byte = d[r * (W.cols / 2) + c / 2];
      const uint8_t code = (c % 2 == 0) ? (byte & 0xf) : (byte >> 4);
      const uint8_t g = W.group_scales[e * W.group_scale_stride() + r * (W.cols / kNvfp4GroupSize) + c / kNvfp4GroupSize];
      return E2m1ToFloat(code) * E4m3ToFloat(g) * W.row_scale2[e * W.row_scale2_stride() + r];
    }
    case WeightFormat::kBf16:
    default: {
      const uint16_t* d = static_cast<const uint16_t*>(W.data) + e * W.rows * W.cols;
      const uint32_t u = static_cast<uint32_t>(d[r * W.cols + c]) << 16;
      float f;
      __builtin_memcpy(&f, &u, 4);
      return f;
    }
  }
}

}  // namespace tandem::kernels
