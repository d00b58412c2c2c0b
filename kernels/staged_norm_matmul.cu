#include "kernels/staged_norm_matmul.h"

#include <algorithm>

#include "kernels/carveout.h"
#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"
#include "kernels/quant_detail.h"
#include "kernels/staged_matvec.cuh"

namespace tandem::kernels {

namespace detail {

int StagedSmemPerSm() {
  if (CurrentLaunchCarveout() != LaunchCarveout::kFitDecodeAttention) return 0;
  static const int bytes = [] {
    const int per_sm = CurrentDeviceAttribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    const int64_t asked = static_cast<int64_t>(per_sm) * DecodeAttentionCarveoutPercent() / 100;
    // The driver rounds a carveout up to a split the SM has (CUDA C++ Programming Guide, the
    // compute capabilities' tables: 0, 8, 16, 32, 64, 100, 132, 164, 196 or 228 KB on 9.0; up to 100
    // KB on 12.x); on a device with other splits `asked` is the safe figure.
    for (const int kb : {0, 8, 16, 32, 64, 100, 132, 164, 196, 228}) {
      if (kb * 1024 >= asked && kb * 1024 <= per_sm) return kb * 1024;
    }
    return static_cast<int>(asked);
  }();
  return bytes;
}

namespace {

// bf16 rows for the staged kernel: a load is 8 weights (16 bytes), a staged row its 2 * cols bytes.
struct Bf16Rows {
  struct Matrix {
    const uint16_t* w;
    int32_t cols;
  };
  struct Row {};
  using Raw = uint4;
  __device__ static int cols(const Matrix& m) { return m.cols; }
  __device__ static int loads_per_row(const Matrix& m) { return m.cols / 8; }
  __device__ static void StageRow(unsigned char* dst, const Matrix& m, int64_t r, int t, int n) {
    const uint16_t* src = m.w + r * m.cols;
    for (int i = t; i < m.cols / 8; i += n) CpAsync16(SmemAddr(dst + 16 * i), src + 8 * i, true);
  }
  __device__ static Row StagedRowOf(const Matrix&, int64_t, const unsigned char*) { return {}; }
  __device__ static void FetchStaged(Raw& raw, const Matrix&, const Row&, const unsigned char* srow, int j) {
    raw = reinterpret_cast<const uint4*>(srow)[j];
  }
  template <int R, bool kSharedX>
  __device__ static void Dot(float (&acc)[R], const Raw (&raw)[R], const Matrix&, const Row (&)[R], const float* x,
                             int j) {
    const float4* xp = reinterpret_cast<const float4*>(x + 8 * j);
    const float4 a = LoadX4<kSharedX>(xp), b = LoadX4<kSharedX>(xp + 1);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float w[8];
      Widen8(raw[r], w);
      acc[r] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
    }
  }
};

}  // namespace
}  // namespace detail

namespace {

// Both entry points: the checks, then the format's launcher (`norm`: the staged kernel's kNorm).
bool Staged(bool norm, float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
            const bf16_bits* norm_w, const QuantMatrix& W, float eps, cudaStream_t stream, float w_offset,
            const StagedReady* ready) {
  KERNEL_REQUIRE(W.count == 1 && W.data != nullptr && W.cols % 8 == 0 && W.cols < (int64_t{1} << 30));
  for (const void* p : {static_cast<const void*>(y), static_cast<const void*>(x_out), static_cast<const void*>(xn_out),
                        static_cast<const void*>(x_in), static_cast<const void*>(delta),
                        static_cast<const void*>(norm_w)}) {
    KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(p) % 16 == 0);
  }
  // The weights are copied in 16-byte pieces: a matrix that does not start on 16 bytes keeps the
  // other forms (the FP8 kernels require it anyway; NVFP4 checks its arrays itself).
  if (W.rows == 0 || reinterpret_cast<uintptr_t>(W.data) % 16 != 0) return false;
  switch (W.format) {
    case WeightFormat::kFp8Block:
      return detail::norm_matmul_fp8_staged(norm, y, x_out, xn_out, x_in, delta, norm_w, W, eps, stream, w_offset,
                                            ready);
    case WeightFormat::kNvfp4:
      return detail::norm_matmul_nvfp4_staged(norm, y, x_out, xn_out, x_in, delta, norm_w, W, eps, stream, w_offset,
                                              ready);
    default: {
      const detail::Bf16Rows::Matrix m{static_cast<const uint16_t*>(W.data), static_cast<int32_t>(W.cols)};
      return detail::LaunchStagedNormMatvec<detail::Bf16Rows>(norm, y, x_out, xn_out, x_in, delta, norm_w, m, W.cols,
                                                              W.rows, 2 * W.cols, eps, w_offset, stream, ready);
    }
  }
}

}  // namespace

bool add_rmsnorm_matmul_staged(float* y, float* x_out, float* xn_out, const float* x_in, const float* delta,
                               const bf16_bits* norm_w, const QuantMatrix& W, float eps, cudaStream_t stream,
                               float w_offset, const StagedReady* ready) {
  KERNEL_REQUIRE(x_out != nullptr && norm_w != nullptr && x_out != x_in && x_out != delta);
  KERNEL_REQUIRE(ready == nullptr || (ready->counter != nullptr && ready->count > 0));
  return Staged(true, y, x_out, xn_out, x_in, delta, norm_w, W, eps, stream, w_offset, ready);
}

bool matmul_staged(float* y, const float* x, const QuantMatrix& W, cudaStream_t stream) {
  return Staged(false, y, nullptr, nullptr, x, nullptr, nullptr, W, 0.0f, stream, 0.0f, nullptr);
}

}  // namespace tandem::kernels
