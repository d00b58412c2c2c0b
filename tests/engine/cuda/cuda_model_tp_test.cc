// The cuda backend at tensor-parallel sizes 2 and 4 against the transformers golden for
// qwen3moe-tiny: the ranks are threads of this process on ONE GPU, joined by Gloo over loopback,
// so the model uses host-staged collectives (device_collectives.h) and runs without graphs. Same
// bounds as the TP=1 test (cuda_model_golden_test.cc): logits at every position of the three
// prompts within 1e-2 relative and the identical 16-token greedy continuations. This checks the
// sharded upload, the two all-reduces per layer and the vocabulary gather; the NCCL path (one GPU
// per rank, graphs on) is exercised by `cuda_decode_bench --tp N` and tandem-infer on 2+ GPUs.
// Skips where no GPU is present.
#include <cstdio>
#include <functional>

#include <gtest/gtest.h>

#include "common/status.h"
#include "engine/comm/rank_threads.h"
#include "engine/cuda/cuda_model.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/cpu/golden_check.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::engine {
namespace {

class cuda_model_tp : public ::testing::TestWithParam<int> {};

TEST_P(cuda_model_tp, LogitsAndGreedyMatchTransformers) {
  SKIP_WITHOUT_GPU();
  const int tp = GetParam();
  auto golden = testing::LoadGolden(testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  ModelLoadOptions opt;
  opt.backend = "cuda";
  const auto on_device0 = []() -> absl::Status {  // every rank on the one GPU
    return cudaSetDevice(0) == cudaSuccess ? absl::OkStatus() : absl::InternalError("cudaSetDevice(0)");
  };
  absl::Status st = testing::RunOnRanks(tp, opt, on_device0, [&](StepDriver& driver) {
    return testing::CheckGoldenPrompts(driver, *golden, "cuda tp=" + std::to_string(tp), 1e-2);
  });
  ASSERT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Tp, cuda_model_tp, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& p) { return "tp" + std::to_string(p.param); });

// The same shard loaded at TP=2 with the ranks' weights checked the cheap way: a batched decode
// step of three sequences equals each sequence decoded alone (the gather lays rows out right).
TEST(cuda_model_tp_batch, BatchedDecodeMatchesSingleAtTp2) {
  SKIP_WITHOUT_GPU();
  auto golden = testing::LoadGolden(testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  absl::Status st = RunRanksAsThreads(2, [&](Comm& comm) -> absl::Status {
    if (cudaSetDevice(0) != cudaSuccess) return absl::InternalError("cudaSetDevice(0)");
    ModelLoadOptions opt;
    opt.backend = "cuda";
    opt.rank = comm.rank();
    opt.world = 2;
    opt.comm = &comm;
    ASSIGN_OR_RETURN(auto model, Model::Load(testing::TinyModelDir(), opt));
    ASSIGN_OR_RETURN(testing::BatchedAndAlone r, testing::DecodeBatchedAndAlone(*model, *golden));
    if (comm.rank() != 0) {
      EXPECT_EQ(r.batched.rows(), 0) << "only rank 0 returns logits";
      return absl::OkStatus();
    }
    EXPECT_EQ(r.batched.rows(), 3);
    testing::ExpectBatchedRowsMatchAlone(r, "cuda tp=2 batched decode");
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

// Shapes a TP size cannot split are refused before any weight is read.
TEST(cuda_model_tp_check, RefusesIndivisibleSizes) {
  ModelConfig c;
  c.model_type = "qwen3_moe";
  c.hidden_size = 2048;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.moe_intermediate_size = 768;
  c.intermediate_size = 6144;
  c.num_experts = 128;
  EXPECT_TRUE(cuda::CheckSupported(c, 1).ok());
  EXPECT_TRUE(cuda::CheckSupported(c, 2).ok());
  EXPECT_TRUE(cuda::CheckSupported(c, 8).ok());
  EXPECT_FALSE(cuda::CheckSupported(c, 3).ok());
  EXPECT_FALSE(cuda::CheckSupported(c, 64).ok());
}

}  // namespace
}  // namespace tandem::engine
