// The cuda backend's FP8 (e4m3) KV cache (ModelLoadOptions::kv_cache_dtype "fp8"; kernels in
// kv_fp8_cuda_test) on the golden prompts of the three tiny models, against the same model with a
// bf16 KV cache (the acceptance) and with the default float32 one, by kv_dtype_check.h:
// logits within the cpu backend's measured bound (cpu_model_kv_dtype_test: fp8 vs f32 or bf16
// KV at most 0.047 there; 8e-2), greedy identical or a near tie where it parts, decode steps from
// graphs. Also: the pool's bytes per token are half of bf16's. Skips where no GPU is present.
#include <algorithm>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/cpu/golden.h"
#include "tests/engine/cpu/kv_dtype_check.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::engine {
namespace {

constexpr double kLogitBound = 8e-2;

absl::StatusOr<std::unique_ptr<Model>> LoadCuda(const std::string& dir, const std::string& kv_dtype) {
  ModelLoadOptions opt;
  opt.backend = "cuda";
  opt.kv_cache_dtype = kv_dtype;
  return Model::Load(dir, opt);
}

// (fixture, reference kv dtype)
class cuda_model_kv_fp8 : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(cuda_model_kv_fp8, LogitsNearAndGreedyIdenticalToTheReferenceKv) {
  SKIP_WITHOUT_GPU();
  const auto& [name, ref_dtype] = GetParam();
  const std::string dir = testing::TestdataDir() + "/" + name;
  auto golden = testing::LoadGolden(dir);
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto ref = LoadCuda(dir, ref_dtype);
  auto fp8 = LoadCuda(dir, "fp8");
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ((*fp8)->kv_spec().bytes_per_element, 1);
  EXPECT_EQ((*fp8)->kv_spec().bytes_per_token() * ((*ref)->kv_spec().bytes_per_element),
            (*ref)->kv_spec().bytes_per_token());
  StepDriver ref_driver(ref->get(), nullptr), fp8_driver(fp8->get(), nullptr);
  testing::CompareKvDtypeRuns(ref_driver, fp8_driver, *golden, "cuda " + name + " kv=fp8", ref_dtype + " KV",
                              kLogitBound);
  EXPECT_TRUE(ref_driver.Stop().ok());
  EXPECT_TRUE(fp8_driver.Stop().ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, cuda_model_kv_fp8,
                         ::testing::Combine(::testing::Values("qwen3moe-tiny", "qwen35moe-tiny", "qwen3next-tiny"),
                                            ::testing::Values("bf16", "f32")),
                         [](const auto& p) {
                           std::string n = std::get<0>(p.param) + "_vs_" + std::get<1>(p.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace tandem::engine
