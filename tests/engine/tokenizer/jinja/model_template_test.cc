// Loading a model's chat template, and the real Qwen3 one (tests/data/qwen3-tokenizer) rendered
// by our interpreter against the renderings by Python's jinja2 that the C++ ChatML is checked on
// (tests/engine/tokenizer/testdata/chat_template_refs.json): two references agreeing with us.
#include "engine/tokenizer/jinja/model_template.h"

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/test_util.h"

namespace tandem::jinja {
namespace {

using Json = nlohmann::ordered_json;
using ::tandem::testing::TempDir;

void Write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(JinjaModelTemplate, FromTokenizerConfig) {
  TempDir dir;
  Write(dir / "tokenizer_config.json",
        R"({"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "chat_template": "{{ bos_token }}{{ messages[0].content }}"})");
  auto t = LoadModelChatTemplate(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bos_token, "<s>");
  EXPECT_EQ(t->eos_token, "</s>");
  EXPECT_EQ(*t->tmpl.Render(Json{{"bos_token", t->bos_token}, {"messages", {{{"content", "hi"}}}}}), "<s>hi");
}

TEST(JinjaModelTemplate, NamedListAndJinjaFile) {
  TempDir dir;
  Write(dir / "tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  auto t = LoadModelChatTemplate(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->tmpl.Render(Json::object()), "D");
  Write(dir / "chat_template.jinja", "J\n");  // beside the config, it wins
  t = LoadModelChatTemplate(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->tmpl.Render(Json::object()), "J");
  EXPECT_EQ(t->source, dir / "chat_template.jinja");
}

TEST(JinjaModelTemplate, MissingOrBrokenTemplates) {
  TempDir dir;
  EXPECT_EQ(LoadModelChatTemplate(dir.path()).status().code(), absl::StatusCode::kNotFound);
  Write(dir / "tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_EQ(LoadModelChatTemplate(dir.path()).status().code(), absl::StatusCode::kNotFound);
  Write(dir / "chat_template.jinja", "ok\n{% include 'x.jinja' %}");
  auto t = LoadModelChatTemplate(dir.path());
  ASSERT_FALSE(t.ok());
  const std::string msg(t.status().message());
  EXPECT_NE(msg.find("chat_template.jinja: template line 2: unsupported statement {% include %}"), std::string::npos) << msg;
}

TEST(JinjaModelTemplate, Qwen3MatchesJinja2Renderings) {
  auto t = LoadModelChatTemplate(::tandem::testing::TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(t.ok()) << t.status() << " (run scripts/testdata.sh)";
  const Json refs = Json::parse(::tandem::testing::ReadTextFile(std::string(TOKENIZER_TEST_DIR) + "/testdata/chat_template_refs.json"));
  int compared = 0;
  for (const auto& c : refs["cases"]) {
    const std::string name = c["name"].get<std::string>();
    Json ctx = {{"messages", c["messages"]}, {"tools", c["tools"]}, {"add_generation_prompt", true}};
    EXPECT_EQ(*t->tmpl.Render(ctx), c["text"].get<std::string>()) << name;
    ctx["enable_thinking"] = false;
    EXPECT_EQ(*t->tmpl.Render(ctx), c["text_nothink"].get<std::string>()) << name;
    ctx.erase("enable_thinking");
    ctx["add_generation_prompt"] = false;
    EXPECT_EQ(*t->tmpl.Render(ctx), c["text_no_prompt"].get<std::string>()) << name;
    compared += 3;
  }
  EXPECT_EQ(compared, 21);
}

}  // namespace
}  // namespace tandem::jinja
