// Helpers of the GPU tests: skip without a GPU, device buffers, fresh random inputs, poisoned
// outputs, and the relative error ||out - ref|| / ||ref|| (METHOD.md), NaN never passing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "kernels/bf16.h"
#include "kernels/cuda_check.h"
#include "kernels/fp8.h"
#include "kernels/split_order.h"

namespace tandem::kernels::testing {

// "" when a CUDA device is usable, else why not (the test then skips with that message).
inline std::string NoGpuReason() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) return std::string("no usable CUDA device: ") + cudaGetErrorString(err);
  if (n == 0) return "no CUDA device";
  return "";
}

#define SKIP_WITHOUT_GPU()                                      \
  do {                                                          \
    const std::string _why = ::tandem::kernels::testing::NoGpuReason(); \
    if (!_why.empty()) GTEST_SKIP() << _why;                    \
  } while (0)

// "(a,b,c)": the shape in a test's printed comparison lines.
inline std::string Shape(std::initializer_list<int64_t> dims) {
  std::string s = "(";
  for (int64_t d : dims) s += std::to_string(d) + ",";
  s.back() = ')';
  return s;
}

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T))); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { Upload(host); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  void Upload(const std::vector<T>& host) {
    CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> Download() const {
    std::vector<T> h(n_);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  // All bytes 0xFF: NaN as float, -1 as int, NaN as bf16: an unwritten output cannot pass.
  void Poison() { CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T))); }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// A generator seeded from the clock, its seed printed: every run draws fresh inputs.
inline std::mt19937_64& Rng() {
  static std::mt19937_64 rng = [] {
    uint64_t seed = std::random_device{}();
    std::printf("random seed %llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return rng;
}

// Uniform with standard deviation `scale` (a cheap draw: the large weight tensors hold 10^8 values).
inline std::vector<float> RandomFloats(size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  uint64_t state = Rng()();
  const float k = scale * 1.7320508f / 8388608.0f;  // sqrt(3) * scale / 2^23
  for (auto& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<int32_t>(state >> 40) - (1 << 23)) * k;
  }
  return v;
}

// A row of `cols` floats (cols % 32 == 0) rearranged into its split order (kernels/split_order.h).
inline std::vector<float> SplitOrdered(const float* row, int64_t cols) {
  std::vector<float> out(cols);
  for (int64_t q = 0; q < cols / 4; ++q) std::copy_n(row + 4 * q, 4, out.begin() + 4 * SplitOrderQuad(q, cols));
  return out;
}

inline std::vector<bf16_bits> RandomBf16(size_t n, float scale = 1.0f) {
  std::vector<float> f = RandomFloats(n, scale);
  std::vector<bf16_bits> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = FloatToBf16(f[i]);
  return v;
}

// Random e4m3 codes of both signs below 16 in magnitude (never NaN): an FP8 KV cache's contents.
inline std::vector<fp8_e4m3> RandomE4m3(size_t n) {
  std::vector<fp8_e4m3> v(n);
  for (auto& x : v) {
    const uint64_t r = Rng()();
    x.bits = static_cast<uint8_t>((r % 0x58) | ((r >> 32) & 1) << 7);  // exponent field < 11
  }
  return v;
}

// e4m3 codes decoded and multiplied by `scale` (a layer's k or v scale).
inline std::vector<float> E4m3ToFloats(const std::vector<fp8_e4m3>& v, float scale) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = E4m3Decode(v[i].bits) * scale;
  return f;
}

// ||got - want||_2 / ||want||_2; infinity when any value of got is NaN or infinite.
inline double RelError(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

inline std::vector<float> Bf16ToFloats(const std::vector<bf16_bits>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = Bf16ToFloat(v[i]);
  return f;
}

// Prints and checks one comparison: "<what>: rel err 3.1e-07 (bound 1e-3); out[0..2] = ... vs ...".
inline void ExpectClose(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                        double bound) {
  ASSERT_EQ(got.size(), want.size());
  const double rel = RelError(got, want);
  std::printf("%-44s rel err %.3g (bound %.0e); out[0..2] = %.5f %.5f %.5f vs ref %.5f %.5f %.5f\n",
              what.c_str(), rel, bound, got[0], got.size() > 1 ? got[1] : 0.f, got.size() > 2 ? got[2] : 0.f,
              want[0], want.size() > 1 ? want[1] : 0.f, want.size() > 2 ? want[2] : 0.f);
  EXPECT_LT(rel, bound) << what;
}

// Whether two outputs are the same bits (a repeated launch, or two paths that must agree exactly).
inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// max |got - want| / max |want|; infinity when got has a NaN or an infinity. For outputs compared
// with each other (the router's logits, top-k), where an error counts against the largest of them.
inline double MaxRelError(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, top = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    top = std::max(top, std::fabs(static_cast<double>(want[i])));
  }
  return err / top;
}

// T rows of `in` random activations with a few channels 20x larger (RMSNorm outputs carry such
// channels), so the largest outputs are not all alike.
inline std::vector<float> WideChannelFloats(int64_t T, int64_t in) {
  std::vector<float> x = RandomFloats(T * in);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 13; k < in; k += 97) x[t * in + k] *= 20.0f;
  }
  return x;
}

// Microseconds per call of f on the default stream: the median of `runs` calls after a warm-up.
template <typename F>
double MedianUs(F&& f, int runs) {
  f();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> us;
  for (int i = 0; i < runs; ++i) {
    CUDA_CHECK(cudaEventRecord(start));
    f();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1000.0f * ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace tandem::kernels::testing
