// Random quantized weight stacks (kernels/quant_weight.h) on the host and on the device, shared by
// the quantized kernels' tests: block-scaled FP8 with random e4m3 bytes (never the NaN codes) and a
// random positive scale per block, NVFP4 with random code bytes (every code in both nibbles),
// positive e4m3 group scales and random row scales; and the experts a router would pick.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/quant_weight.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels::testing {

// A stack of `count` FP8 matrices on the host and on the device, with its two descriptors.
struct Fp8Case {
  int64_t count = 1, rows = 0, cols = 0, block_out = 128, block_in = 128;
  bool row_per_scale_row = false;  // row_block = 1 (else block_out)
  int64_t col_phase = 0;
};

struct Fp8Stack {
  std::vector<uint8_t> data;
  std::vector<float> scales;
  QuantMatrix host;
  std::unique_ptr<DeviceBuffer<uint8_t>> d_data;
  std::unique_ptr<DeviceBuffer<float>> d_scales;
  QuantMatrix device;
};

// Random e4m3 bytes (no NaN code) with random scales of about 0.01 / sqrt(cols): an e4m3 byte drawn
// uniformly has an rms near 100, so products with unit inputs come out near 1.
inline std::unique_ptr<Fp8Stack> RandomFp8(const Fp8Case& c) {
  auto s = std::make_unique<Fp8Stack>();
  QuantMatrix& W = s->host;
  W.format = WeightFormat::kFp8Block;
  W.rows = c.rows, W.cols = c.cols, W.count = c.count;
  W.block_in = c.block_in;
  W.row_block = c.row_per_scale_row ? 1 : c.block_out;
  W.col_phase = c.col_phase;
  s->data.resize(static_cast<size_t>(c.count * W.data_bytes()));
  for (auto& b : s->data) {
    do {
      b = static_cast<uint8_t>(Rng()() & 0xff);
    } while ((b & 0x7f) == 0x7f);
  }
  const std::vector<float> u = RandomFloats(static_cast<size_t>(c.count * W.scale_stride()), 0.28f);
  s->scales.resize(u.size());
  const float unit = 0.01f / std::sqrt(static_cast<float>(c.cols));
  for (size_t i = 0; i < u.size(); ++i) s->scales[i] = unit * (1.0f + u[i]);  // in [0.5, 1.5] * unit
  W.data = s->data.data();
  W.scales = s->scales.data();
  s->d_data = std::make_unique<DeviceBuffer<uint8_t>>(s->data);
  s->d_scales = std::make_unique<DeviceBuffer<float>>(s->scales);
  s->device = W;
  s->device.data = s->d_data->get();
  s->device.scales = s->d_scales->get();
  return s;
}

inline std::string Describe(const Fp8Case& c) {
  return Shape({c.count, c.rows, c.cols}) + " blocks " + Shape({c.block_out, c.block_in}) +
         (c.row_per_scale_row ? " row_block 1" : "") + " phase " + std::to_string(c.col_phase);
}

// A random NVFP4 stack of `count` (rows x cols) matrices on the host and on the device, with the
// descriptors of both copies.
struct Nvfp4Stack {
  std::vector<uint8_t> data, scales;
  std::vector<float> scale2;
  DeviceBuffer<uint8_t> d_data, d_scales;
  DeviceBuffer<float> d_scale2;
  QuantMatrix host, device;

  Nvfp4Stack(int64_t count, int64_t rows, int64_t cols)
      : data(Bytes(count * rows * cols / 2)),
        scales(GroupScales(count * rows * cols / kNvfp4GroupSize)),
        scale2(Scale2(count * rows)),
        d_data(data),
        d_scales(scales),
        d_scale2(scale2) {
    host.format = WeightFormat::kNvfp4;
    host.rows = rows, host.cols = cols, host.count = count;
    device = host;
    host.data = data.data(), host.group_scales = scales.data(), host.row_scale2 = scale2.data();
    device.data = d_data.get(), device.group_scales = d_scales.get(), device.row_scale2 = d_scale2.get();
  }

  static std::vector<uint8_t> Bytes(int64_t n) {  // 8 bytes a draw: the expert stacks hold 10^8
    std::vector<uint8_t> v(n);
    uint64_t r = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (i % 8 == 0) r = Rng()();
      v[i] = static_cast<uint8_t>(r >> (8 * (i % 8)));
    }
    return v;
  }
  // Positive e4m3 bytes: most in [0.5, 3.75] (exponent fields 6..8) so every group weighs in the
  // result, one in eight anywhere below the NaN code (zero and subnormals included).
  static std::vector<uint8_t> GroupScales(int64_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) {
      const uint64_t r = Rng()();
      b = static_cast<uint8_t>(r % 8 == 0 ? (r >> 8) % 0x7f : 0x30 + (r >> 8) % 0x18);
    }
    return v;
  }
  static std::vector<float> Scale2(int64_t n) {
    std::vector<float> v = RandomFloats(n, 0.3f);
    for (auto& s : v) s = 0.01f * (1.0f + s);  // in (0.005, 0.015)
    return v;
  }
};

// K distinct experts per token of T, like the router gives.
inline std::vector<int32_t> RandomExpertIds(int64_t T, int64_t E, int64_t K) {
  std::vector<int32_t> ids(T * K);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    std::copy(perm.begin(), perm.begin() + K, ids.begin() + t * K);
  }
  return ids;
}

}  // namespace tandem::kernels::testing
