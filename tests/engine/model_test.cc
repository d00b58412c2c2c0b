// Model::Load (engine/model.cc): the backend dispatch and its refusals, each naming what is wrong
// (the cuda backend's own checks are in tests/engine/cuda).
#include "engine/model.h"

#include <cstdio>

#include <gtest/gtest.h>

#include "tests/common/test_util.h"

namespace tandem::engine {
namespace {

TEST(ModelLoad, RefusesWhatTheCpuBackendDoesNotSupport) {
  const std::string td = ::tandem::testing::TestdataDir();
  struct Case {
    std::string dir;
    ModelLoadOptions opt;
    std::string want;
  };
  ModelLoadOptions tp3;
  tp3.world = 3;
  ModelLoadOptions tpu;
  tpu.backend = "tpu";
  ModelLoadOptions tp2_no_comm;
  tp2_no_comm.world = 2;
  ModelLoadOptions rank_outside;
  rank_outside.rank = 2;
  rank_outside.world = 2;
  std::vector<Case> cases = {
      {td + "/qwen3next-tiny", tp3, "is not divisible by the tensor-parallel size 3"},
      {td + "/qwen3moe-tiny", tp3, "num_attention_heads (8) is not divisible by the tensor-parallel size 3"},
      {td + "/qwen3moe-tiny", tpu, "unknown backend \"tpu\""},
      {td + "/qwen3moe-tiny", tp2_no_comm, "needs a comm"},
      {td + "/qwen3moe-tiny", rank_outside, "rank 2 outside a group of 2"},
      {td + "/does-not-exist", {}, "does-not-exist"},
  };
  for (const auto& c : cases) {
    auto m = Model::Load(c.dir, c.opt);
    ASSERT_FALSE(m.ok()) << c.dir;
    const std::string msg(m.status().message());
    std::printf("%s: %s\n", c.dir.c_str(), msg.c_str());
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
  }
}

TEST(ModelLoad, LoadsTheHybridTinyModelsOnTheCpuBackend) {
  ModelLoadOptions opt;
  opt.threads = 1;
  for (const char* name : {"qwen35moe-tiny", "qwen3next-tiny"}) {
    auto m = Model::Load(::tandem::testing::TestdataDir() + "/" + name, opt);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    // Only the full-attention layer (1 of 4) keeps KV; the Gated DeltaNet layers keep state.
    EXPECT_EQ((*m)->kv_spec().num_layers, 1) << name;
    EXPECT_EQ((*m)->kv_spec().num_kv_heads_local, 2) << name;
  }
}

TEST(ModelLoad, LoadsTheTinyModelOnTheCpuBackend) {
  ModelLoadOptions opt;
  opt.threads = 1;
  auto m = Model::Load(::tandem::testing::TestdataDir() + "/qwen3moe-tiny", opt);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->rank(), 0);
  EXPECT_EQ((*m)->world(), 1);
  EXPECT_EQ((*m)->config().model_type, "qwen3_moe");
  EXPECT_EQ((*m)->config().vocab_size, 4096);
  // The cpu backend keeps float32 KV for every layer's 4 kv heads of 32.
  const KvCacheSpec kv = (*m)->kv_spec();
  EXPECT_EQ(kv.num_layers, 4);
  EXPECT_EQ(kv.num_kv_heads_local, 4);
  EXPECT_EQ(kv.head_dim, 32);
  EXPECT_EQ(kv.bytes_per_element, 4);
}

}  // namespace
}  // namespace tandem::engine
