// openai/serving_stack.h over the cpu qwen3moe-tiny model: the defaults the stack fills in (the
// model's context up to 4096, the vocabulary bound), a port that is taken fails Start and leaves
// the driver to its caller, and Stop ends the engine and the server (once; the destructor after
// it does nothing more).
#include "openai/serving_stack.h"

#include <fstream>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "httplib.h"
#include "tests/common/test_util.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::openai {
namespace {

class ServingStackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::ModelLoadOptions lo;
    lo.backend = "cpu";
    lo.threads = 1;
    auto m = engine::Model::Load(engine::testing::TinyModelDir(), lo);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    driver_ = std::make_unique<engine::StepDriver>(model_.get(), nullptr);
  }
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::StepDriver> driver_;
  ServeMetrics metrics_{"tiny"};
};

ServingStackOptions Small() {
  ServingStackOptions o;
  o.engine.kv_tokens = 256;
  o.engine.max_num_seqs = 2;
  o.server.port = 0;
  o.server.served_model_name = "tiny";
  return o;
}

TEST_F(ServingStackTest, FillsTheSharedDefaultsAndServes) {
  auto stack = ServingStack::Start(driver_.get(), nullptr, &metrics_, Small());
  ASSERT_TRUE(stack.ok()) << stack.status();
  EXPECT_EQ((*stack)->max_model_len(), 4096) << "min(4096, max_position_embeddings)";
  EXPECT_EQ((*stack)->engine().Stats().kv_tokens_total, 256);
  httplib::Client c("127.0.0.1", (*stack)->server().port());
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_NE(models->body.find("\"tiny\""), std::string::npos) << models->body;
  // A token id past the model's vocabulary is refused by the server (vocab_size filled in).
  auto bad = c.Post("/v1/completions", R"({"model":"tiny","prompt":[999999],"max_tokens":1})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  (*stack)->StopListening();
  EXPECT_EQ((*stack)->Drain(std::chrono::milliseconds(0)), 0);
  (*stack)->Stop();
  EXPECT_EQ((*stack)->engine().Stats().kv_tokens_total, 256) << "readable after Stop";
  (*stack)->Stop();  // once is enough; again is a no-op
  EXPECT_TRUE(driver_->Stop().ok());
}

TEST_F(ServingStackTest, ATakenPortFailsStartAndLeavesTheDriverToItsCaller) {
  auto first = ServingStack::Start(driver_.get(), nullptr, &metrics_, Small());
  ASSERT_TRUE(first.ok()) << first.status();
  // A second stack on the port the first one holds.
  engine::StepDriver driver(model_.get(), nullptr);
  ServingStackOptions o = Small();
  o.server.port = (*first)->server().port();
  auto stack = ServingStack::Start(&driver, nullptr, &metrics_, o);
  EXPECT_FALSE(stack.ok());
  std::printf("taken port: %s\n", stack.status().ToString().c_str());
  EXPECT_TRUE(driver.Stop().ok()) << "the driver was not stopped by the failed stack";
}

TEST_F(ServingStackTest, AChatTemplateThatDoesNotParseFailsStart) {
  auto tok = tokenizer::Tokenizer::LoadFromDir(::tandem::testing::TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(tok.ok()) << tok.status();
  ::tandem::testing::TempDir dir;
  std::ofstream(dir / "chat_template.jinja") << "{% for m in messages %}{{ m.content }}{% endfor %}{% include 'x' %}";
  ServingStackOptions o = Small();
  o.chat_template_dir = dir.path();
  auto stack = ServingStack::Start(driver_.get(), tok->get(), &metrics_, o);
  ASSERT_FALSE(stack.ok());
  EXPECT_NE(stack.status().message().find("unsupported statement {% include %}"), std::string::npos) << stack.status();
  EXPECT_NE(stack.status().message().find("chat_template.jinja"), std::string::npos) << stack.status();
  EXPECT_TRUE(driver_->Stop().ok());
}

}  // namespace
}  // namespace tandem::openai
