// The prefill products' throughput (kernels/gemm.h: cuBLAS; kernels/moe_gemm.h: grouped MoE GEMM)
// at 2048 tokens of Qwen3-30B-A3B, in TFLOP/s against the H200's ~989 bf16 dense, beside the
// decode kernels on the same work in chunks below the GEMM threshold. Their accuracy is
// tests/kernels/gemm_cuda_test. Run: prefill_gemm_bench (one GPU).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/gemm.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/moe_gemm.h"

namespace tandem::bench {
namespace {

using kernels::bf16_bits;
using namespace kernels;

// n device values, freed at scope end.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) { CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T))); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(1);
  return rng;
}

// Uniform in [-1, 1) (the values do not matter to the timing; no NaN or infinity).
std::vector<float> RandomFloats(size_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(Rng());
  return v;
}

// K distinct experts per token, uniformly, as a router spreads them.
std::vector<int32_t> UniformRoute(int64_t T, int64_t E, int64_t K) {
  std::vector<int32_t> ids(T * K), perm(E);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), Rng());
    std::copy(perm.begin(), perm.begin() + K, ids.begin() + t * K);
  }
  return ids;
}

std::string Shape(std::initializer_list<int64_t> dims) {
  std::string s = "(";
  for (int64_t d : dims) s += std::to_string(d) + ",";
  s.back() = ')';
  return s;
}

// Milliseconds per call of f, averaged over reps after a warm-up.
template <typename F>
double TimeMs(F f, int reps) {
  f();
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaEventRecord(a, nullptr));
  for (int i = 0; i < reps; ++i) f();
  CUDA_CHECK(cudaEventRecord(b, nullptr));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return ms / reps;
}

void PrintRate(const std::string& what, double flops, double ms, double old_ms,
               const char* old_what = "decode kernels") {
  const double tflops = flops / (ms * 1e-3) / 1e12;
  std::printf("%-44s %8.3f ms %7.1f TFLOP/s (%4.1f%% of 989)", what.c_str(), ms, tflops, 100.0 * tflops / 989.0);
  if (old_ms > 0) std::printf("; %s %8.3f ms (%.1fx)", old_what, old_ms, old_ms / ms);
  std::printf("\n");
}

// Qwen3-30B-A3B at 2048 tokens: one layer's products. The decode kernels are timed on the same
// work in chunks below the threshold, for comparison.
void PrefillThroughput() {
  const int64_t T = 2048, H = 2048, E = 128, K = 8, I = 768;
  const int64_t chunk = std::min<int64_t>(kGemmMinTokens - 1, 63);
  auto x = RandomFloats(T * 4096);
  DeviceBuffer<float> d_x(x), d_y(T * 5120);
  for (auto [in, out, name] : std::vector<std::tuple<int64_t, int64_t, const char*>>{
           {H, 5120, "qkv"}, {4096, H, "o_proj"}, {H, E, "router"}, {H, 151936, "lm_head (all rows)"}}) {
    if (out * T > T * 5120) {  // the lm_head row: fewer tokens, same buffer
      DeviceBuffer<bf16_bits> d_w(out * in);
      CUDA_CHECK(cudaMemset(d_w.get(), 0x3C, out * in * sizeof(bf16_bits)));
      const int64_t rows = T * 5120 / out;
      const double ms = TimeMs([&] { gemm_bf16(d_y.get(), d_x.get(), d_w.get(), rows, in, out, nullptr); }, 10);
      PrintRate(std::string("prefill gemm ") + name + " " + Shape({rows, in, out}), 2.0 * rows * in * out, ms, 0);
      continue;
    }
    DeviceBuffer<bf16_bits> d_w(out * in);
    CUDA_CHECK(cudaMemset(d_w.get(), 0x3C, out * in * sizeof(bf16_bits)));  // 0.0115 everywhere
    if (std::string(name) == "router") {
      // The router keeps its float32 input: x split into bf16 hi + lo, two GEMMs (gemm.h), against
      // the float32 matrix-vector kernels it ran on before over the whole prefill.
      const double ms = TimeMs([&] { gemm_bf16_split(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr); }, 10);
      const double old_ms = TimeMs([&] { matvec_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr); }, 10);
      PrintRate("prefill gemm_bf16_split router " + Shape({T, in, out}), 2.0 * T * in * out, ms, old_ms);
      continue;
    }
    const double ms = TimeMs([&] { gemm_bf16(d_y.get(), d_x.get(), d_w.get(), T, in, out, nullptr); }, 10);
    double old_ms = 0;
    if (chunk >= 1) {
      old_ms = TimeMs(
          [&] {
            for (int64_t t0 = 0; t0 < T; t0 += chunk) {
              matmul_bf16(d_y.get() + t0 * out, d_x.get() + t0 * in, d_w.get(), std::min(chunk, T - t0), in, out,
                          nullptr);
            }
          },
          2);
    }
    PrintRate(std::string("prefill gemm ") + name + " " + Shape({T, in, out}), 2.0 * T * in * out, ms, old_ms);
  }

  DeviceBuffer<bf16_bits> d_gu(E * 2 * I * H), d_down(E * H * I);
  CUDA_CHECK(cudaMemset(d_gu.get(), 0x3C, E * 2 * I * H * sizeof(bf16_bits)));
  CUDA_CHECK(cudaMemset(d_down.get(), 0x3C, E * H * I * sizeof(bf16_bits)));
  const std::vector<int32_t> ids = UniformRoute(T, E, K);
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<float> d_w(RandomFloats(T * K)), d_act(T * K * I), d_out(T * H);
  const double gu_ms =
      TimeMs([&] { moe_gate_up_grouped(d_act.get(), d_x.get(), d_ids.get(), d_gu.get(), T, K, H, I, nullptr); }, 10);
  const double down_ms = TimeMs(
      [&] { moe_down_grouped(d_out.get(), d_act.get(), d_ids.get(), d_w.get(), d_down.get(), T, K, H, I, nullptr); },
      10);
  double old_gu = 0, old_down = 0;
  if (chunk >= 1) {
    old_gu = TimeMs(
        [&] {
          for (int64_t t0 = 0; t0 < T; t0 += chunk) {
            moe_gate_up(d_act.get() + t0 * K * I, d_x.get() + t0 * H, d_ids.get() + t0 * K, d_gu.get(),
                        std::min(chunk, T - t0), K, H, I, nullptr);
          }
        },
        2);
    old_down = TimeMs(
        [&] {
          for (int64_t t0 = 0; t0 < T; t0 += chunk) {
            moe_down(d_out.get() + t0 * H, d_act.get() + t0 * K * I, d_ids.get() + t0 * K, d_w.get() + t0 * K,
                     d_down.get(), std::min(chunk, T - t0), K, H, I, nullptr);
          }
        },
        2);
  }
  PrintRate("prefill moe_gate_up_grouped " + Shape({T, E, K, H, I}), 2.0 * T * K * H * 2 * I, gu_ms, old_gu);
  PrintRate("prefill moe_down_grouped " + Shape({T, E, K, H, I}), 2.0 * T * K * I * H, down_ms, old_down);
  // The two in one call (one sort, bf16 act in scratch), against the two calls above.
  const double fused_ms = TimeMs(
      [&] {
        moe_grouped(d_out.get(), d_x.get(), d_ids.get(), d_w.get(), d_gu.get(), d_down.get(), T, K, H, I, nullptr);
      },
      10);
  PrintRate("prefill moe_grouped " + Shape({T, E, K, H, I}), 2.0 * T * K * H * 3 * I, fused_ms, gu_ms + down_ms,
            "the two calls");
}

}  // namespace
}  // namespace tandem::bench

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "prefill_gemm_bench: no CUDA device\n");
    return 1;
  }
  tandem::bench::PrefillThroughput();
  return 0;
}
