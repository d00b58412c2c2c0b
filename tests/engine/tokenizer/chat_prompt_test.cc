// ChatPrompt: the real Qwen3 template of the fixture (tests/data/qwen3-tokenizer) rendered from
// the server's ChatMessage list equals the jinja2 references byte for byte (tools present and
// absent, thinking on and off), a plain user message renders as the built-in ChatML did, a
// folder without a template falls back to that ChatML, documents reach a template that reads
// them, a template that does not parse fails at load naming the construct, one that raises
// fails the render with its message.
#include "engine/tokenizer/chat_prompt.h"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/common/test_util.h"
#include "tests/engine/tokenizer/chat_refs.h"

namespace tandem::tokenizer {
namespace {

using ::tandem::testing::TempDir;

void Write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::shared_ptr<const ChatPrompt> Qwen3() {
  auto p = ChatPrompt::Load(::tandem::testing::TestdataDir() + "/qwen3-tokenizer");
  EXPECT_TRUE(p.ok()) << p.status() << " (run scripts/testdata.sh)";
  return p.ok() ? *p : nullptr;
}

TEST(ChatPromptTest, Qwen3TemplateMatchesTheReferences) {
  auto prompt = Qwen3();
  ASSERT_NE(prompt, nullptr);
  EXPECT_NE(prompt->source().find("tokenizer_config.json"), std::string::npos) << prompt->source();
  int compared = 0, with_tools = 0;
  const auto refs = testing::LoadChatRefs();
  for (const auto& c : refs["cases"]) {
    const std::string name = c["name"].get<std::string>();
    const std::vector<ChatMessage> messages = testing::ChatRefMessages(c["messages"]);
    ChatTemplateOptions o;
    o.tools = testing::ChatRefTools(c["tools"]);
    with_tools += !o.tools.empty();
    EXPECT_EQ(*prompt->Render(messages, o), c["text"].get<std::string>()) << name;
    o.enable_thinking = false;
    EXPECT_EQ(*prompt->Render(messages, o), c["text_nothink"].get<std::string>()) << name;
    o.enable_thinking = true;
    o.add_generation_prompt = false;
    EXPECT_EQ(*prompt->Render(messages, o), c["text_no_prompt"].get<std::string>()) << name;
    compared += 3;
  }
  EXPECT_EQ(compared, 21);
  EXPECT_EQ(with_tools, 2);
}

TEST(ChatPromptTest, PlainUserMessageIsTodaysChatML) {
  auto prompt = Qwen3();
  ASSERT_NE(prompt, nullptr);
  for (bool thinking : {true, false}) {
    ChatTemplateOptions o;
    o.enable_thinking = thinking;
    const std::vector<ChatMessage> m = {{"user", "Hi", std::nullopt, {}}};
    EXPECT_EQ(*prompt->Render(m, o), ApplyChatTemplate(m, o)) << thinking;
    EXPECT_EQ(*ChatPrompt::ChatML()->Render(m, o), ApplyChatTemplate(m, o));
  }
}

TEST(ChatPromptTest, ToolCallArgumentsAreObjectsUnlessNotJson) {
  auto prompt = Qwen3();
  ASSERT_NE(prompt, nullptr);
  // Compact JSON arguments (as OpenAI sends them) come back as tojson writes an object; text that
  // is not a JSON object is printed as sent. The null content of the call is "".
  const std::vector<ChatMessage> m = {{"user", "q", std::nullopt, {}},
                                      {"assistant", "", std::nullopt, {{"f", R"({"b":1,"a":[2]})"}, {"g", "not json"}}}};
  ChatTemplateOptions o;
  o.add_generation_prompt = false;
  const std::string text = *prompt->Render(m, o);
  EXPECT_NE(text.find("{\"name\": \"f\", \"arguments\": {\"b\": 1, \"a\": [2]}}"), std::string::npos) << text;
  EXPECT_NE(text.find("{\"name\": \"g\", \"arguments\": not json}"), std::string::npos) << text;
}

// Every field a template can read reaches it as vLLM passes it: ids, name and tool_call_id only
// when given, arguments parsed with their key order ("" as {}), reasoning_content kept.
TEST(ChatPromptTest, MessagesReachTheTemplateAsVllmPassesThem) {
  TempDir dir;
  Write(dir / "chat_template.jinja", "{{ messages | tojson }}");
  auto p = ChatPrompt::Load(dir.path());
  ASSERT_TRUE(p.ok()) << p.status();
  ChatMessage call{"assistant", "", "why", {{"f", R"({"z":1,"a":{"y":2,"b":3}})", "call_1"}, {"g", "", ""}}};
  ChatMessage result{"tool", "r", std::nullopt, {}};
  result.tool_call_id = "call_1";
  result.name = "f";
  ChatMessage user{"user", "u", std::nullopt, {}};
  user.name = "ann";
  EXPECT_EQ(*(*p)->Render({user, call, result}, {}),
            R"([{"role": "user", "content": "u", "name": "ann"}, )"
            R"({"role": "assistant", "content": "", "tool_calls": [)"
            R"({"id": "call_1", "type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": {"y": 2, "b": 3}}}}, )"
            R"({"type": "function", "function": {"name": "g", "arguments": {}}}], "reasoning_content": "why"}, )"
            R"({"role": "tool", "content": "r", "tool_call_id": "call_1", "name": "f"}])");
}

TEST(ChatPromptTest, HugeToolObjectIsRefused) {
  auto prompt = Qwen3();
  ASSERT_NE(prompt, nullptr);
  std::string tool = "{";
  for (int i = 0; i < 2000; ++i) tool += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  tool += "}";
  ChatTemplateOptions o;
  o.tools = {tool};
  auto r = prompt->Render({{"user", "q", std::nullopt, {}}}, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

TEST(ChatPromptTest, DocumentsReachTheTemplate) {
  TempDir dir;
  Write(dir / "chat_template.jinja",
        "{% if documents %}{% for d in documents %}[{{ d.title }}: {{ d.text }}]{% endfor %}{% else %}none{% endif %}");
  auto p = ChatPrompt::Load(dir.path());
  ASSERT_TRUE(p.ok()) << p.status();
  ChatTemplateOptions o;
  EXPECT_EQ(*(*p)->Render({{"user", "u", std::nullopt, {}}}, o), "none");
  o.documents = R"([{"title": "a", "text": "x"}, {"title": "b", "text": "y"}])";
  EXPECT_EQ(*(*p)->Render({{"user", "u", std::nullopt, {}}}, o), "[a: x][b: y]");
  o.documents = "[not json";
  EXPECT_EQ((*p)->Render({{"user", "u", std::nullopt, {}}}, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatPromptTest, FolderWithoutTemplateUsesChatML) {
  TempDir dir;
  Write(dir / "tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  auto p = ChatPrompt::Load(dir.path());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->source(), "");
  const std::vector<ChatMessage> m = {{"system", "s", std::nullopt, {}}, {"user", "u", std::nullopt, {}}};
  EXPECT_EQ(*(*p)->Render(m, {}), ApplyChatTemplate(m, {}));
}

TEST(ChatPromptTest, BrokenTemplateFailsAtLoadAndRaisingOneAtRender) {
  TempDir dir;
  Write(dir / "chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}\n{% include 'x.jinja' %}");
  auto p = ChatPrompt::Load(dir.path());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("unsupported statement {% include %}"), std::string::npos) << p.status();
  Write(dir / "chat_template.jinja",
        "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user turn') }}{% endif %}"
        "{{ bos_token }}{{ messages[0].content }}");
  Write(dir / "tokenizer_config.json", R"({"bos_token": "<s>"})");
  p = ChatPrompt::Load(dir.path());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*(*p)->Render({{"user", "u", std::nullopt, {}}}, {}), "<s>u");
  auto r = (*p)->Render({{"system", "s", std::nullopt, {}}}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Conversations must start with a user turn"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace tandem::tokenizer
