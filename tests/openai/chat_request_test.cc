// chat_request: a chat's messages (tool calls, tool results, names), its tools, tool_choice and
// parallel_tool_calls, and chat_template_kwargs; every malformed field is a 400 naming it.
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "openai/openai_protocol.h"

namespace tandem::openai {
namespace {

ApiError ChatError(const std::string& body) {
  ChatRequest r;
  auto e = ParseChatRequest(body, &r);
  EXPECT_TRUE(e.has_value()) << "accepted: " << body;
  EXPECT_EQ(e.value_or(ApiError{}).http_status, 400) << body;
  return e.value_or(ApiError{});
}

// A valid chat body with `extra` fields after the messages.
std::string Body(const std::string& messages, const std::string& extra = "") {
  return R"({"messages":)" + messages + (extra.empty() ? "" : "," + extra) + "}";
}

const char* kUser = R"([{"role":"user","content":"x"}])";
const char* kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},)"
    R"({"type":"function","function":{"name":"noop"}}])";

TEST(ChatRequest, MessagesWithToolCallsAndResults) {
  ChatRequest r;
  auto e = ParseChatRequest(
      R"({"model":"m","messages":[{"role":"developer","content":"be brief"},
          {"role":"user","name":"ann","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]},
          {"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"b\":1,\"a\":2}"}}]},
          {"role":"tool","tool_call_id":"call_1","content":"42"}],
          "chat_template_kwargs":{"enable_thinking":false},"max_completion_tokens":7})",
      &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "hi there");
  EXPECT_EQ(r.messages[1].name, "ann");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.messages[2].tool_calls[0].name, "f");
  EXPECT_EQ(r.messages[2].tool_calls[0].arguments, "{\"b\":1,\"a\":2}");  // as sent
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[3].content, "42");
  EXPECT_FALSE(r.enable_thinking);
  EXPECT_EQ(r.common.max_tokens, 7);

  // Without ids (as vLLM takes them): results are matched by position.
  ASSERT_FALSE(ParseChatRequest(
      R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},
                      {"role":"tool","content":"1"}]})",
      &r));
  EXPECT_EQ(r.messages[0].tool_calls[0].id, "");
  EXPECT_EQ(r.messages[1].tool_call_id, "");
}

TEST(ChatRequest, MalformedMessagesNameTheField) {
  struct Case {
    const char* messages;
    const char* param;
  };
  const Case cases[] = {
      {R"([])", "messages"},
      {R"({"role":"user"})", "messages"},
      {R"([{"content":"x"}])", "messages[0].role"},
      {R"([{"role":"wizard","content":"x"}])", "messages[0].role"},
      {R"([{"role":"user","content":[{"type":"image_url"}]}])", "messages[0].content"},
      {R"([{"role":"user","content":"x","audio":{}}])", "messages[0].audio"},
      {R"([{"role":"user","content":"x","name":5}])", "messages[0].name"},
      {R"([{"role":"tool","content":"42","tool_call_id":7}])", "messages[0].tool_call_id"},
      {R"([{"role":"user","content":"x","tool_call_id":"c"}])", "messages[0].tool_call_id"},
      {R"([{"role":"user","content":"x","tool_calls":[]}])", "messages[0].tool_calls"},
      {R"([{"role":"user","content":"x","reasoning_content":"r"}])", "messages[0].reasoning_content"},
      {R"([{"role":"assistant","content":"x","refusal":"no"}])", "messages[0].refusal"},
      {R"([{"role":"assistant","tool_calls":{}}])", "messages[0].tool_calls"},
      {R"([{"role":"assistant","tool_calls":[5]}])", "messages[0].tool_calls[0]"},
      {R"([{"role":"assistant","tool_calls":[{"id":5,"type":"function","function":{"name":"f","arguments":"{}"}}]}])",
       "messages[0].tool_calls[0].id"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","type":"tool","function":{"name":"f","arguments":"{}"}}]}])",
       "messages[0].tool_calls[0].type"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","type":"function"}]}])", "messages[0].tool_calls[0].function"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f"}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}","x":1}}]}])",
       "messages[0].tool_calls[0].function.x"},
  };
  for (const Case& c : cases) {
    const std::string body = Body(c.messages);
    EXPECT_EQ(ChatError(body).param, c.param) << body;
  }
  EXPECT_EQ(ChatError(R"({})").param, "messages");
  EXPECT_EQ(ChatError(Body(kUser, R"("chat_template_kwargs":{"enable_thinking":"no"})")).param,
            "chat_template_kwargs.enable_thinking");
}

TEST(ChatRequest, ToolsKeepTheirKeyOrderAndAreRead) {
  ChatRequest r;
  auto e = ParseChatRequest(Body(kUser, kTools), &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.tools.size(), 2u);
  // The template sees the tool as the client wrote it ("name" before "description" ...).
  EXPECT_EQ(r.tools[0].find("\"name\""), r.tools[0].find("\"name\":\"get_weather\""));
  EXPECT_LT(r.tools[0].find("\"name\""), r.tools[0].find("\"description\""));
  EXPECT_LT(r.tools[0].find("\"type\":\"object\""), r.tools[0].find("\"properties\""));
  ASSERT_EQ(r.tool_functions.size(), 2u);
  EXPECT_EQ(r.tool_functions[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(r.tool_functions[0].parameters)["required"][0], "city");
  EXPECT_EQ(r.tool_functions[1].name, "noop");
  EXPECT_EQ(r.tool_functions[1].parameters, "");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kAuto);
  EXPECT_TRUE(r.parallel_tool_calls);
}

TEST(ChatRequest, ToolChoiceForms) {
  ChatRequest r;
  ASSERT_FALSE(ParseChatRequest(Body(kUser, std::string(kTools) + R"(,"tool_choice":"none")"), &r));
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kNone);
  ASSERT_FALSE(ParseChatRequest(Body(kUser, std::string(kTools) + R"(,"tool_choice":"required","parallel_tool_calls":false)"), &r));
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_FALSE(r.parallel_tool_calls);
  ASSERT_FALSE(ParseChatRequest(
      Body(kUser, std::string(kTools) + R"(,"tool_choice":{"type":"function","function":{"name":"noop"}})"), &r));
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kFunction);
  EXPECT_EQ(r.tool_choice.function, "noop");
  // auto and none need no tools (nothing to call either way).
  ASSERT_FALSE(ParseChatRequest(Body(kUser, R"("tool_choice":"none")"), &r));
  ASSERT_FALSE(ParseChatRequest(Body(kUser, R"("tool_choice":"auto")"), &r));
}

TEST(ChatRequest, MalformedToolsAndToolChoiceNameTheField) {
  struct Case {
    std::string extra;
    const char* param;
  };
  const std::string tools = kTools;
  const Case cases[] = {
      {R"("tools":{})", "tools"},
      {R"("tools":[5])", "tools[0]"},
      {R"("tools":[{"type":"code_interpreter"}])", "tools[0].type"},
      {R"("tools":[{"type":"function"}])", "tools[0].function"},
      {R"("tools":[{"type":"function","function":{"name":"f"},"extra":1}])", "tools[0].extra"},
      {R"("tools":[{"type":"function","function":{"description":"d"}}])", "tools[0].function.name"},
      {R"("tools":[{"type":"function","function":{"name":"a b"}}])", "tools[0].function.name"},
      {R"("tools":[{"type":"function","function":{"name":""}}])", "tools[0].function.name"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])", "tools[0].function.parameters"},
      {R"("tools":[{"type":"function","function":{"name":"f","description":1}}])", "tools[0].function.description"},
      {R"("tools":[{"type":"function","function":{"name":"f","strict":"yes"}}])", "tools[0].function.strict"},
      {R"("tools":[{"type":"function","function":{"name":"f","examples":[]}}])", "tools[0].function.examples"},
      {R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])",
       "tools[1].function.name"},
      {tools + R"(,"tool_choice":"sometimes")", "tool_choice"},
      {tools + R"(,"tool_choice":5)", "tool_choice"},
      {tools + R"(,"tool_choice":{"type":"function","function":{"name":"missing"}})", "tool_choice"},
      {tools + R"(,"tool_choice":{"type":"function"})", "tool_choice"},
      {tools + R"(,"tool_choice":{"type":"function","function":{"name":"noop"},"x":1})", "tool_choice.x"},
      {R"("tool_choice":"required")", "tool_choice"},
      {tools + R"(,"parallel_tool_calls":1)", "parallel_tool_calls"},
  };
  for (const Case& c : cases) {
    const std::string body = Body(kUser, c.extra);
    EXPECT_EQ(ChatError(body).param, c.param) << body;
  }
}

TEST(ChatRequest, DocumentsReachTheTemplateAsSent) {
  ChatRequest r;
  auto e = ParseChatRequest(Body(kUser, R"("documents":[{"title":"T","text":"body"},{"z":1,"a":2}])"), &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.documents, R"([{"title":"T","text":"body"},{"z":1,"a":2}])");  // key order kept
  ASSERT_FALSE(ParseChatRequest(Body(kUser), &r));
  EXPECT_EQ(r.documents, "");
  EXPECT_EQ(ChatError(Body(kUser, R"("documents":{"text":"x"})")).param, "documents");
  EXPECT_EQ(ChatError(Body(kUser, R"("documents":[{"text":"x"},"y"])")).param, "documents[1]");
}

TEST(ChatRequest, TemplateKwargsPassOnEveryKeyButTheRequestsOwn) {
  ChatRequest r;
  auto e = ParseChatRequest(Body(kUser, R"("chat_template_kwargs":{"thinking_budget":5,"enable_thinking":false})"), &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.template_kwargs, R"({"thinking_budget":5,"enable_thinking":false})");
  EXPECT_FALSE(r.enable_thinking);
  for (const char* key : {"messages", "tools", "documents", "bos_token", "eos_token", "add_generation_prompt"}) {
    EXPECT_EQ(ChatError(Body(kUser, std::string(R"("chat_template_kwargs":{")") + key + R"(":1})")).param,
              std::string("chat_template_kwargs.") + key);
  }
}

}  // namespace
}  // namespace tandem::openai
