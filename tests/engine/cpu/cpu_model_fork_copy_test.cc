// The cpu backend's copies for forked choices (StepBatch::block_copies / state_copies, applied at
// the start of CpuModel::Forward): fork_copy_check.h on the hybrids (KV blocks of the attention
// layers and the DeltaNet layers' state slots) and on qwen3moe-tiny (KV only), with float32, bf16
// and fp8 KV; and the step checks refusing copies outside the pools.
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "tests/common/test_util.h"
#include "tests/engine/cpu/fork_copy_check.h"

namespace tandem::engine {
namespace {

class cpu_model_fork_copy : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(cpu_model_fork_copy, AForkDecodesAsItsParentFromTheCopies) {
  const auto& [name, dtype] = GetParam();
  ModelLoadOptions opt;
  opt.threads = 2;
  opt.kv_cache_dtype = dtype;
  auto model = Model::Load(::tandem::testing::TestdataDir() + "/" + name, opt);
  ASSERT_TRUE(model.ok()) << model.status();
  testing::CheckForkCopies(**model, name + " kv=" + dtype);

  // Copies outside the pools (8 blocks, 4 slots or none) are refused before anything runs.
  StepBatch bad;
  const int32_t slot = (*model)->kv_spec().has_state() ? 0 : -1;
  bad.seqs.push_back(testing::ForkCheckChunk(1, std::vector<int32_t>{1}, 0, std::vector<int32_t>{0}, slot));
  bad.block_copies = {{1, 8}};
  EXPECT_EQ((*model)->Forward(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.block_copies = {{2, 2}};
  EXPECT_EQ((*model)->Forward(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.block_copies.clear();
  bad.state_copies = {{0, 4}};
  EXPECT_EQ((*model)->Forward(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Models, cpu_model_fork_copy,
                         ::testing::Combine(::testing::Values("qwen35moe-tiny", "qwen3next-tiny", "qwen3moe-tiny"),
                                            ::testing::Values("f32", "bf16", "fp8")),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace tandem::engine
