// tandem-infer make-model: the random-weight checkpoint loads through the same path as real
// checkpoints, runs at TP=1 and TP=2 with identical greedy tokens, and refuses to overwrite.
#include <filesystem>
#include <string>

#include "engine/comm/rank_threads.h"
#include "engine/generate.h"
#include "infer/make_model.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "gtest/gtest.h"
#include "tests/common/test_util.h"

namespace tandem::infer {
namespace {

using engine::Comm;
using engine::Generate;
using engine::GenerateOptions;
using engine::LoadModelConfig;
using engine::Model;
using engine::ModelLoadOptions;
using engine::RunRanksAsThreads;
using engine::RunWorkerLoop;
using engine::StepDriver;
using ::tandem::testing::TempDir;

std::vector<int32_t> Greedy(const std::string& dir, int world) {
  std::vector<int32_t> out;
  auto body = [&](Comm& comm) -> absl::Status {
    ModelLoadOptions lo;
    lo.rank = comm.rank();
    lo.world = comm.world_size();
    lo.comm = world > 1 ? &comm : nullptr;
    lo.threads = 1;
    auto model = Model::Load(dir, lo);
    if (!model.ok()) return model.status();
    if (comm.rank() > 0) return RunWorkerLoop(**model, comm);
    StepDriver driver(model->get(), world > 1 ? &comm : nullptr);
    GenerateOptions go;
    go.max_tokens = 8;
    auto r = Generate(driver, {9707, 11, 1879}, go);  // "Hello, world" in Qwen3's vocabulary
    if (!r.ok()) return r.status();
    out = r->token_ids;
    return driver.Stop();
  };
  absl::Status st = RunRanksAsThreads(world, body);
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

TEST(MakeModelTest, LoadsAndGeneratesTheSameTokensAtTp1AndTp2) {
  TempDir tmp;
  MakeModelOptions o;
  o.out_dir = tmp / "gen";  // make-model creates it: it must not exist yet
  o.vocab_size = 2048 * 8;  // small and divisible by the TP sizes; covers the prompt ids
  ASSERT_TRUE(MakeRandomQwen3MoeModel(o).ok());
  auto config = LoadModelConfig(o.out_dir);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model_type, "qwen3_moe");
  EXPECT_EQ(config->vocab_size, o.vocab_size);
  EXPECT_EQ(config->num_experts, 16);
  auto tp1 = Greedy(o.out_dir, 1);
  auto tp2 = Greedy(o.out_dir, 2);
  ASSERT_EQ(tp1.size(), 8u);
  EXPECT_EQ(tp1, tp2);
  std::printf("make-model greedy tokens TP=1 vs TP=2: %d %d %d ... (%zu compared)\n", tp1[0], tp1[1],
              tp1[2], tp1.size());
}

TEST(MakeModelTest, RefusesToOverwriteAndNeedsTokenizerFiles) {
  TempDir tmp;
  MakeModelOptions o;
  o.out_dir = tmp / "twice";
  o.vocab_size = 1024;
  ASSERT_TRUE(MakeRandomQwen3MoeModel(o).ok());
  absl::Status again = MakeRandomQwen3MoeModel(o);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  std::filesystem::remove_all(o.out_dir);

  o.tokenizer_dir = tmp / "no-tokenizer";
  std::filesystem::create_directories(o.tokenizer_dir);
  absl::Status st = MakeRandomQwen3MoeModel(o);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_NE(std::string(st.message()).find("tokenizer.json"), std::string::npos) << st;
}

}  // namespace
}  // namespace tandem::infer
