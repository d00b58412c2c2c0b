// tool_call_grammar: the grammar of tool_choice required / named in both call formats admits
// calls of the allowed tools with valid arguments only, and what it admits tool_calls.h parses
// back; schemas it cannot express are a 400 naming the tool.
#include "openai/tool_call_grammar.h"

#include <gtest/gtest.h>

#include "engine/grammar/compiled_grammar.h"
#include "openai/tool_calls.h"
#include "tests/common/test_util.h"
#include "tests/engine/grammar/grammar_test_util.h"

namespace tandem::openai {
namespace {

using grammar::ByteVocabulary;
using grammar::Matches;

ChatRequest Request(ToolChoice::Mode mode, const std::string& function = "", bool parallel = true) {
  ChatRequest r;
  r.tool_functions = {
      {"get_weather",
       R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]})"},
      {"noop", ""},
  };
  r.tool_choice.mode = mode;
  r.tool_choice.function = function;
  r.parallel_tool_calls = parallel;
  return r;
}

std::shared_ptr<const grammar::CompiledGrammar> Compile(tokenizer::ToolCallSyntax format, const ChatRequest& r) {
  grammar::Grammar g;
  auto e = BuildToolCallGrammar(format, r, &g);
  EXPECT_FALSE(e) << e->message;
  auto c = grammar::CompiledGrammar::Compile(std::move(g), ByteVocabulary());
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(ToolCallGrammar, JsonRequiredAdmitsParsableCallsOnly) {
  auto g = Compile(tokenizer::ToolCallSyntax::kJson, Request(ToolChoice::Mode::kRequired));
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
  const std::string noop = "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(Matches(g, call));
  EXPECT_TRUE(Matches(g, noop));
  EXPECT_TRUE(Matches(g, call + "\n" + noop));  // parallel calls
  EXPECT_FALSE(Matches(g, "Sure! " + call));    // nothing before the call
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 5}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, ""));

  ParsedToolCalls parsed = ParseToolCalls(call + "\n" + noop);
  ASSERT_EQ(parsed.tool_calls.size(), 2u);
  EXPECT_EQ(parsed.tool_calls[0].name, "get_weather");
  EXPECT_EQ(parsed.tool_calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(parsed.content, "");

  // Without parallel calls, one; a named function, only that one.
  auto one = Compile(tokenizer::ToolCallSyntax::kJson, Request(ToolChoice::Mode::kRequired, "", /*parallel=*/false));
  EXPECT_TRUE(Matches(one, call));
  EXPECT_FALSE(Matches(one, call + "\n" + noop));
  auto named = Compile(tokenizer::ToolCallSyntax::kJson, Request(ToolChoice::Mode::kFunction, "noop"));
  EXPECT_TRUE(Matches(named, noop));
  EXPECT_FALSE(Matches(named, call));
  EXPECT_FALSE(Matches(named, noop + "\n" + noop));
}

TEST(ToolCallGrammar, XmlRequiredAdmitsParsableCallsOnly) {
  auto g = Compile(tokenizer::ToolCallSyntax::kXml, Request(ToolChoice::Mode::kRequired));
  const std::string call =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
  EXPECT_TRUE(Matches(g, call));
  EXPECT_TRUE(Matches(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_TRUE(Matches(g, "<tool_call>\n<function=noop>\n</function>\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>"));  // city is required
  EXPECT_FALSE(Matches(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                          "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>"));
  ParsedToolCalls parsed = ParseToolCalls(call, ToolCallOptionsFromTools(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])"));
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].arguments, R"({"city":"New York","days":3})");
}

TEST(ToolCallGrammar, RefusalsNameTheField) {
  grammar::Grammar g;
  ChatRequest r = Request(ToolChoice::Mode::kRequired);
  r.tool_functions[1].parameters = R"({"type":"object","properties":{"id":{"type":"string","pattern":"^a+$"}}})";
  auto e = BuildToolCallGrammar(tokenizer::ToolCallSyntax::kJson, r, &g);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools[1].function.parameters");
  std::cout << e->message << "\n";
  r.tool_functions[1].parameters = R"({"anyOf":[{"type":"object"}]})";
  e = BuildToolCallGrammar(tokenizer::ToolCallSyntax::kXml, r, &g);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools[1].function.parameters");
}

}  // namespace
}  // namespace tandem::openai
