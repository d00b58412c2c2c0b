// The C++ chat template against renderings of the real Jinja template by jinja2
// (testdata/chat_template_refs.json, made by make_chat_refs.py): reasoning in history, tool
// calls, tool responses, tool definitions, a system message in the middle.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/chat_template.h"
#include "tests/engine/tokenizer/chat_refs.h"

namespace tandem::tokenizer {
namespace {

TEST(ChatTemplateTest, MatchesJinjaRenderings) {
  const auto refs = testing::LoadChatRefs();
  size_t compared = 0;
  for (const auto& c : refs["cases"]) {
    const auto messages = testing::ChatRefMessages(c["messages"]);
    ChatTemplateOptions options;
    options.tools = testing::ChatRefTools(c["tools"]);
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
