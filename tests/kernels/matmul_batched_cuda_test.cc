// kernels/matmul_batched.h against ref::matmul_bf16 (and matmul_bf16's dispatch to it) on random
// inputs, the output poisoned before each launch. Bound 1e-4 relative: the float32 inputs enter
// the bf16 tensor cores as hi + lo parts, so the result is float32 arithmetic to ~1e-5. Skips
// where no GPU is present.
#include <cstdio>

#include "kernels/matmul.h"
#include "kernels/matmul_batched.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::DeviceBuffer;
using testing::ExpectClose;
using testing::MedianUs;
using testing::RandomBf16;
using testing::RandomFloats;

TEST(matmul_batched_cuda, MatchesReference) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t T, in, out;
  };
  // Qwen3-30B-A3B's q/k/v and o_proj at decode batches; a k tail (96); partial token tiles; more
  // than one token tile (40, 70); one row group past a block (out 80, and 4240: two groups a block
  // on any GPU of up to 132 SMs, the last block's second group past the matrix).
  for (const Case& c : std::vector<Case>{{8, 2048, 5120}, {32, 4096, 2048}, {1, 64, 32}, {5, 96, 80},
                                         {40, 2048, 256}, {70, 128, 1024}, {17, 768, 2048}, {9, 96, 4240}}) {
    ASSERT_TRUE(MatmulBatchedSupported(c.in, c.out));
    auto x = RandomFloats(c.T * c.in);
    auto w = RandomBf16(c.out * c.in, 0.05f);
    DeviceBuffer<float> d_x(x), d_y(c.T * c.out);
    DeviceBuffer<bf16_bits> d_w(w);
    std::vector<float> want(c.T * c.out);
    ref::matmul_bf16(want.data(), x.data(), w.data(), c.T, c.in, c.out);
    const std::string tag =
        "matmul_batched T=" + std::to_string(c.T) + " in=" + std::to_string(c.in) + " out=" + std::to_string(c.out);
    d_y.Poison();
    matmul_batched(d_y.get(), d_x.get(), d_w.get(), c.T, c.in, c.out, nullptr);
    ExpectClose(tag, d_y.Download(), want, 1e-4);
    if (c.T < 64) {  // matmul_bf16's dispatch below the prefill GEMM path (kernels/gemm.h)
      d_y.Poison();
      matmul_bf16(d_y.get(), d_x.get(), d_w.get(), c.T, c.in, c.out, nullptr);
      ExpectClose(tag + " via matmul_bf16", d_y.Download(), want, 1e-4);
    }
  }
}

// Qwen3-30B-A3B's q/k/v (5120 x 2048) and o_proj (2048 x 4096) at decode batches of 8-32 tokens:
// microseconds and weight bytes per microsecond, printed, not asserted (the decode bench decides).
// Four copies of the weights in turn (84 / 67 MB, past the H200's 50 MB L2), so each call reads
// its weights from DRAM as a decode step does.
TEST(matmul_batched_cuda, QwenShapeTimed) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    const char* name;
    int64_t in, out;
  };
  constexpr int kCopies = 4;
  for (const Shape& sh : {Shape{"q/k/v", 2048, 5120}, Shape{"o_proj", 4096, 2048}}) {
    const int64_t n = sh.out * sh.in;
    DeviceBuffer<bf16_bits> d_w(RandomBf16(kCopies * n, 0.02f));
    for (const int64_t T : {8, 16, 32}) {
      DeviceBuffer<float> d_x(RandomFloats(T * sh.in)), d_y(T * sh.out);
      int call = 0;
      const double us = MedianUs(
          [&] { matmul_batched(d_y.get(), d_x.get(), d_w.get() + (call++ % kCopies) * n, T, sh.in, sh.out, nullptr); },
          15);
      std::printf("matmul_batched %-6s %2lld tokens: %.1f us (%.0f GB/s of weights)\n", sh.name,
                  static_cast<long long>(T), us, static_cast<double>(n * 2) / us / 1e3);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
