// The bench's batched prefill rows on the cuda engine, with the real shapes of the three synthetic
// models cut to their first four layers (bf16 weights, bf16 KV): the run's pool (PlanKvPool) fits
// the GPU by CheckKvPoolFits and is allocated, the step of N prompts (PrefillStep) runs in one
// Forward and gives one logits row per prompt, and each row equals the same prompt prefilled
// alone in the same blocks and state slot: the prompts of one step share no KV block or state
// (a shared block or slot would make the rows differ by the order of magnitude of the logits).
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench/decode_bench_flags.h"
#include "bench/decode_bench_prefill.h"
#include "bench/synthetic_configs.h"
#include "engine/cuda/cuda_model.h"
#include "engine/step.h"
#include "tests/engine/cpu/golden.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::bench {
namespace {

class decode_bench_prefill_cuda : public ::testing::TestWithParam<std::string> {};

// Both steps take the bf16 prefill path (at least kernels::kGemmMinTokens tokens in the step): the
// rows of one step and the step of one prompt round their activations to bf16 in GEMMs of different
// heights, so they agree to the rounding, not to the bit. A shared block or slot differs by O(1).
constexpr double kBound = 5e-2;

TEST_P(decode_bench_prefill_cuda, BatchedRowsMatchEachPromptAlone) {
  SKIP_WITHOUT_GPU();
  const std::string name = GetParam();
  auto cfg = SyntheticConfig(name);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  cfg->num_hidden_layers = 4;
  if (!cfg->layer_types.empty()) cfg->layer_types.resize(4);
  auto o = ParseDecodeBenchFlags({"--synthetic", name, "--batches", "1", "--contexts", "64", "--steps", "2", "--runs",
                                  "2", "--prefill", "96", "--prefill-batch", "4x96,2x200"});
  ASSERT_TRUE(o.ok()) << o.status();

  auto model = engine::cuda::CreateSyntheticCudaModel(*cfg, 1, kernels::WeightFormat::kBf16);
  ASSERT_TRUE(model.ok()) << model.status();
  engine::Model& m = **model;
  ASSERT_TRUE(engine::cuda::SetKvDtype(m, "bf16").ok());
  const engine::KvCacheSpec kv = m.kv_spec();
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  ASSERT_TRUE(CheckKvPoolFits(*o, static_cast<double>(kv.bytes_per_token()),
                              static_cast<double>(kv.state_bytes_per_slot), static_cast<double>(free_bytes))
                  .ok());
  const KvPool pool = PlanKvPool(*o);
  ASSERT_TRUE(m.AllocateKvCache(static_cast<int32_t>(pool.blocks), o->block_size, pool.state_slots).ok());
  ASSERT_TRUE(engine::cuda::FillKvRandom(m, 3).ok());

  for (const PrefillRow& row : PrefillRows(*o)) {
    const engine::StepBatch step = PrefillStep(row.shape, o->block_size);
    auto batched = m.Forward(step);
    ASSERT_TRUE(batched.ok()) << batched.status();
    ASSERT_EQ(batched->rows(), row.shape.sequences);
    ASSERT_EQ(batched->vocab, cfg->vocab_size);
    for (int s = 0; s < row.shape.sequences; ++s) {
      ASSERT_EQ(batched->seq_ids[s], step.seqs[s].seq_id);
      EXPECT_EQ(batched->positions[s], row.shape.tokens - 1);
      // The same chunk alone (its blocks and slot; a chunk from position 0 restarts the state).
      engine::StepBatch alone;
      alone.seqs.push_back(step.seqs[s]);
      auto one = m.Forward(alone);
      ASSERT_TRUE(one.ok()) << one.status();
      ASSERT_EQ(one->rows(), 1);
      const std::vector<float> got(batched->row(s), batched->row(s) + batched->vocab);
      const std::vector<float> want(one->row(0), one->row(0) + one->vocab);
      const double rel = engine::testing::RelativeError(got, want);
      std::printf("  %s, prefill %s, sequence %d vs alone: logits rel err (max abs diff / max abs logit) = %.3g\n",
                  name.c_str(), PrefillBatchName(row.shape).c_str(), s, rel);
      EXPECT_LT(rel, kBound) << PrefillBatchName(row.shape) << " sequence " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Synthetic, decode_bench_prefill_cuda,
                         ::testing::Values("qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"),
                         [](const auto& p) {
                           std::string s = p.param;
                           for (char& ch : s) ch = (ch == '-' || ch == '.') ? '_' : ch;
                           return s;
                         });

}  // namespace
}  // namespace tandem::bench
