// The C++ chat template against renderings of the real Jinja template by jinja2
// (testdata/chat_template_refs.json, made by make_chat_refs.py): reasoning in history, tool
// calls, tool responses, tool definitions, a system message in the middle.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/chat_template.h"

namespace tandem::tokenizer {
namespace {

std::vector<ChatMessage> ToMessages(const nlohmann::ordered_json& messages) {
  std::vector<ChatMessage> out;
  for (const auto& m : messages) {
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    msg.content = m["content"].get<std::string>();
    if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
    if (m.contains("tool_calls")) {
      for (const auto& c : m["tool_calls"]) {
        msg.tool_calls.push_back({c["function"]["name"].get<std::string>(),
                                  c["function"]["arguments"].get<std::string>()});
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

TEST(ChatTemplateTest, MatchesJinjaRenderings) {
  std::ifstream in(std::string(TOKENIZER_TEST_DIR) + "/testdata/chat_template_refs.json");
  ASSERT_TRUE(in) << "missing chat_template_refs.json";
  std::stringstream ss;
  ss << in.rdbuf();
  // ordered_json: tool definitions must keep the key order of the reference.
  const auto refs = nlohmann::ordered_json::parse(ss.str());
  size_t compared = 0;
  for (const auto& c : refs["cases"]) {
    const auto messages = ToMessages(c["messages"]);
    ChatTemplateOptions options;
    for (const auto& tool : c["tools"]) {
      options.tools.push_back(tool.dump());  // tools arrive as JSON text
    }
    const std::string name = c["name"].get<std::string>();
    EXPECT_EQ(ApplyChatTemplate(messages, options), c["text"].get<std::string>()) << name;
    options.enable_thinking = false;
    EXPECT_EQ(ApplyChatTemplate(messages, options), c["text_nothink"].get<std::string>()) << name;
    options.enable_thinking = true;
    options.add_generation_prompt = false;
    EXPECT_EQ(ApplyChatTemplate(messages, options), c["text_no_prompt"].get<std::string>()) << name;
    std::printf("chat case %-42s %zu messages, %zu chars\n", name.c_str(), messages.size(),
                c["text"].get<std::string>().size());
    compared += 3;
  }
  std::printf("compared %zu renderings\n", compared);
  EXPECT_EQ(compared, 21u);
}

TEST(ChatTemplateTest, EmptyConversationIsJustThePrompt) {
  ChatTemplateOptions options;
  EXPECT_EQ(ApplyChatTemplate({}, options), "<|im_start|>assistant\n");
  options.enable_thinking = false;
  EXPECT_EQ(ApplyChatTemplate({}, options), "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplateTest, ToolJsonKeepsKeyOrderAndNonAscii) {
  ChatTemplateOptions options;
  options.tools = {R"({"z":1,"a":[true,null,"é\n"]})", "not json"};
  const std::string text = ApplyChatTemplate({{"user", "q", {}, {}}}, options);
  EXPECT_NE(text.find("<tools>\n{\"z\": 1, \"a\": [true, null, \"é\\n\"]}\nnot json\n</tools>"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace tandem::tokenizer
