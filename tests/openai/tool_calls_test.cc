#include "openai/tool_calls.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tandem::openai {
namespace {

using Json = nlohmann::ordered_json;

struct Expected {
  std::string name;
  std::string arguments;
};

void ExpectCalls(const ParsedToolCalls& got, const std::vector<Expected>& want) {
  ASSERT_EQ(got.tool_calls.size(), want.size());
  std::set<std::string> ids;
  for (size_t i = 0; i < want.size(); ++i) {
    const ToolCall& call = got.tool_calls[i];
    EXPECT_EQ(call.index, static_cast<int>(i));
    EXPECT_EQ(call.name, want[i].name);
    EXPECT_EQ(Json::parse(call.arguments), Json::parse(want[i].arguments)) << call.arguments;
    EXPECT_TRUE(call.id.starts_with("call_")) << call.id;
    EXPECT_GT(call.id.size(), 20u);
    ids.insert(call.id);
  }
  EXPECT_EQ(ids.size(), want.size()) << "ids must differ";
}

// Feeds `chunks` to a stream parser and gathers what it sent.
ParsedToolCalls Stream(const std::vector<std::string>& chunks) {
  ToolCallStreamParser parser;
  ParsedToolCalls all;
  auto take = [&all](ParsedToolCalls part) {
    all.content += part.content;
    for (ToolCall& call : part.tool_calls) all.tool_calls.push_back(std::move(call));
  };
  for (const std::string& chunk : chunks) take(parser.Feed(chunk));
  take(parser.Finish());
  return all;
}

void ExpectSameIgnoringIds(const ParsedToolCalls& a, const ParsedToolCalls& b,
                           const std::string& where) {
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << where;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].index, b.tool_calls[i].index) << where;
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << where;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << where;
  }
}

// Every way of streaming `text`: one byte at a time, and every 2-way split.
void ExpectStreamingMatches(const std::string& text) {
  const ParsedToolCalls whole = ParseToolCalls(text);
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  ExpectSameIgnoringIds(Stream(bytes), whole, "byte by byte: " + text);
  ExpectSameIgnoringIds(Stream({text}), whole, "one chunk: " + text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ExpectSameIgnoringIds(Stream({text.substr(0, cut), text.substr(cut)}), whole,
                          "split at " + std::to_string(cut) + ": " + text);
  }
}

TEST(ToolCalls, PlainTextIsContent) {
  ParsedToolCalls got = ParseToolCalls("Hello <b>world</b> <tool");
  EXPECT_EQ(got.content, "Hello <b>world</b> <tool");
  EXPECT_TRUE(got.tool_calls.empty());
  EXPECT_EQ(got.FinishReason("stop"), "stop");
  EXPECT_EQ(got.FinishReason("length"), "length");
}

struct WellFormedCase {
  std::string what;
  std::string text;
  std::string content;
  std::vector<Expected> calls;
};

TEST(ToolCalls, WellFormedCallsWholeAndStreamed) {
  const std::vector<WellFormedCase> cases = {
      {"Qwen3 JSON, as its template writes an assistant call",
       "I will check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"Zürich\", \"days\": 2}}\n</tool_call>",
       "I will check.",
       {{"get_weather", R"({"city": "Zürich", "days": 2})"}}},
      {"several JSON calls (arguments absent, an object, a JSON string), content after",
       "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}\n</tool_call>\n"
       "<tool_call>{\"name\": \"c\"}</tool_call>\n\nDone.",
       "Done.",
       {{"a", "{}"}, {"b", R"({"x": [1, 2]})"}, {"c", "{}"}}},
      {"Qwen3-Coder / Qwen3.5 XML: one newline around each value, JSON values when they parse",
       "Let me look.\n\n<tool_call>\n<function=search>\n"
       "<parameter=query>\nbest pizza\n</parameter>\n"
       "<parameter=limit>\n5\n</parameter>\n"
       "<parameter=filters>\n{\"open\": true}\n</parameter>\n"
       "<parameter=note>\nline 1\nline 2\n\n</parameter>\n"
       "<parameter=quoted>\n\"42\"\n</parameter>\n"
       "</function>\n</tool_call>",
       "Let me look.",
       {{"search", R"({"query": "best pizza", "limit": 5, "filters": {"open": true},
                       "note": "line 1\nline 2\n", "quoted": "42"})"}}},
      {"XML call without parameters, then a JSON call",
       "<tool_call>\n<function=now>\n</function>\n</tool_call>"
       "<tool_call>\n{\"name\": \"later\", \"arguments\": {\"h\": 1}}\n</tool_call>",
       "",
       {{"now", "{}"}, {"later", R"({"h": 1})"}}},
  };
  for (const WellFormedCase& c : cases) {
    SCOPED_TRACE(c.what);
    ParsedToolCalls got = ParseToolCalls(c.text);
    EXPECT_EQ(got.content, c.content);
    ExpectCalls(got, c.calls);
    EXPECT_EQ(got.FinishReason("stop"), "tool_calls");
    ExpectStreamingMatches(c.text);
  }
  // Arguments keep the model's key order, compactly written.
  EXPECT_EQ(ParseToolCalls(cases[0].text).tool_calls[0].arguments, R"({"city":"Zürich","days":2})");
}

TEST(ToolCalls, StringTypedXmlParametersKeepTheirText) {
  // write_file.content is a string by its schema: a JSON file's text must not become an object.
  const ToolCallOptions options = ToolCallOptionsFromTools(R"([
    {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
      "properties": {"path": {"type": "string"}, "content": {"type": ["string", "null"]},
                     "mode": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "other"}},
    "not a tool"])");
  EXPECT_EQ(options.string_params,
            (std::set<std::pair<std::string, std::string>>{{"write_file", "path"},
                                                           {"write_file", "content"}}));
  const std::string text =
      "<tool_call>\n<function=write_file>\n<parameter=path>\n123\n</parameter>\n"
      "<parameter=content>\n{\"a\": 1}\n</parameter>\n<parameter=mode>\n420\n</parameter>\n"
      "</function>\n</tool_call>";
  ExpectCalls(ParseToolCalls(text, options),
              {{"write_file", R"({"path": "123", "content": "{\"a\": 1}", "mode": 420})"}});
  ExpectCalls(ParseToolCalls(text),  // without the schemas: JSON when it parses
              {{"write_file", R"({"path": 123, "content": {"a": 1}, "mode": 420})"}});
  ToolCallStreamParser parser(options);
  ParsedToolCalls streamed = parser.Feed(text);
  ExpectCalls(streamed, {{"write_file", R"({"path": "123", "content": "{\"a\": 1}", "mode": 420})"}});
  EXPECT_TRUE(ToolCallOptionsFromTools("{not json").string_params.empty());
  EXPECT_TRUE(ToolCallOptionsFromTools(R"({"tools": []})").string_params.empty());
}

TEST(ToolCalls, MalformedBlocksStayContent) {
  const std::vector<std::string> bad = {
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}\n</tool_call>",  // bad JSON
      "<tool_call>{\"arguments\": {}}</tool_call>",                       // no name
      "<tool_call>{\"name\": 3}</tool_call>",                             // name not a string
      "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>",     // arguments not object
      "<tool_call>{\"name\": \"a\", \"arguments\": \"nope\"}</tool_call>",
      "<tool_call>[1, 2]</tool_call>",
      "<tool_call></tool_call>",
      "<tool_call>\n<function=f>\n<parameter=p>\n1\n</function>\n</tool_call>",  // unclosed param
      "<tool_call>\n<function=>\n</function>\n</tool_call>",                   // empty name
      "<tool_call>\n<function=f>\njunk\n</function>\n</tool_call>",
      "<tool_call>\n<function=f>\n</tool_call>",
  };
  for (const std::string& block : bad) {
    const std::string text = "Before \n" + block + "\nafter";
    ParsedToolCalls got = ParseToolCalls(text);
    EXPECT_EQ(got.content, text) << block;
    EXPECT_TRUE(got.tool_calls.empty()) << block;
    ExpectStreamingMatches(text);
  }
}

TEST(ToolCalls, UnclosedCallAtTheEndIsContent) {
  const std::string text =
      "ok\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"argu";
  ParsedToolCalls got = ParseToolCalls(text);
  ExpectCalls(got, {{"a", "{}"}});
  EXPECT_EQ(got.content, "ok<tool_call>\n{\"name\": \"b\", \"argu");
  ExpectStreamingMatches(text);
}

TEST(ToolCalls, StreamingMatchesWholeTextAtEverySplit) {
  const std::vector<std::string> texts = {
      "",
      "just text, no calls <tool_cal> <tool_callx> <",
      "trailing spaces kept   \n",
      "I will check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Zürich\"}}\n</tool_call>",
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n<function=b>\n<parameter=x>\n[1, 2]\n</parameter>\n</function>\n"
      "</tool_call>\n  tail <tool",
      "a <tool_call><tool_call>{\"name\": \"n\"}</tool_call> b </tool_call> c",
      "x</tool_call>y<tool_call>{\"name\": \"z\"}</tool_call>",
  };
  for (const std::string& text : texts) ExpectStreamingMatches(text);
}

TEST(ToolCalls, StreamingSendsContentEarlyAndCallsOnTheirClosingTag) {
  ToolCallStreamParser parser;
  EXPECT_EQ(parser.Feed("Hello wor").content, "Hello wor");
  EXPECT_EQ(parser.Feed("ld \n<tool").content, "ld");  // " \n<tool" could start a call
  ParsedToolCalls part = parser.Feed("_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
  EXPECT_EQ(part.content, "");
  EXPECT_TRUE(part.tool_calls.empty());
  part = parser.Feed("</tool_call>");
  ASSERT_EQ(part.tool_calls.size(), 1u);
  EXPECT_EQ(part.tool_calls[0].name, "f");
  EXPECT_EQ(part.tool_calls[0].arguments, R"({"a":1})");
  part = parser.Feed("\n<tool_call>{\"name\": \"g\"}</tool_call>");
  ASSERT_EQ(part.tool_calls.size(), 1u);
  EXPECT_EQ(part.tool_calls[0].index, 1);
  EXPECT_EQ(parser.Feed("\n<").content, "");
  EXPECT_EQ(parser.Finish().content, "<");
}

TEST(ToolCalls, OpenAiJsonShapes) {
  ToolCall call{.index = 2, .id = "call_x", .name = "f", .arguments = R"({"a":1})"};
  EXPECT_EQ(Json::parse(ToolCallJson(call, /*streaming=*/false)),
            Json::parse(R"({"id": "call_x", "type": "function",
                            "function": {"name": "f", "arguments": "{\"a\":1}"}})"));
  EXPECT_EQ(Json::parse(ToolCallJson(call, /*streaming=*/true)),
            Json::parse(R"({"index": 2, "id": "call_x", "type": "function",
                            "function": {"name": "f", "arguments": "{\"a\":1}"}})"));
}

TEST(ToolCalls, InvalidUtf8InXmlValueDoesNotThrow) {
  const std::string text =
      "<tool_call>\n<function=f>\n<parameter=p>\nbad \xff\xfe byte\n</parameter>\n</function>\n"
      "</tool_call>";
  ParsedToolCalls got = ParseToolCalls(text);
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_TRUE(Json::accept(got.tool_calls[0].arguments));
}

}  // namespace
}  // namespace tandem::openai
