// response_format parsed into a grammar: each type, each field's error naming it (with the
// place inside the schema for what cannot be constrained), and the server's step that turns a
// format into SamplingParams::grammar over the real Qwen3 vocabulary.
#include "openai/response_format.h"

#include <gtest/gtest.h>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/matcher.h"
#include "engine/tokenizer/tokenizer.h"
#include "openai/openai_protocol.h"
#include "tests/common/test_util.h"

namespace tandem::openai {
namespace {

using Json = nlohmann::ordered_json;

std::optional<ApiError> Parse(const std::string& text, ResponseFormat* out) {
  return ParseResponseFormat(Json::parse(text), out);
}

TEST(ResponseFormatTest, TypesParse) {
  ResponseFormat f;
  EXPECT_FALSE(Parse(R"({"type":"text"})", &f));
  EXPECT_EQ(f.type, ResponseFormat::Type::kText);
  EXPECT_EQ(f.grammar, nullptr);
  EXPECT_FALSE(Parse(R"({"type":"json_object"})", &f));
  EXPECT_EQ(f.type, ResponseFormat::Type::kJsonObject);
  ASSERT_NE(f.grammar, nullptr);
  EXPECT_FALSE(Parse(R"({"type":"json_schema","json_schema":{"name":"weather-1","strict":true,"description":"d",
                        "schema":{"type":"object","properties":{"t":{"type":"number"}},"required":["t"]}}})",
                     &f));
  EXPECT_EQ(f.type, ResponseFormat::Type::kJsonSchema);
  EXPECT_EQ(f.name, "weather-1");
  ASSERT_NE(f.grammar, nullptr);
  // Two schemas differing only in key order are different grammars (members follow the order).
  ResponseFormat g;
  EXPECT_FALSE(Parse(R"({"type":"json_schema","json_schema":{"name":"weather-1","strict":true,"description":"d",
                        "schema":{"required":["t"],"type":"object","properties":{"t":{"type":"number"}}}}})",
                     &g));
  EXPECT_NE(f.key, g.key);
}

TEST(ResponseFormatTest, ErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("json")", "response_format"},
      {R"({})", "response_format.type"},
      {R"({"type":"yaml"})", "response_format.type"},
      {R"({"type":"json_object","strict":true})", "response_format.strict"},
      {R"({"type":"json_schema"})", "response_format.json_schema"},
      {R"({"type":"json_schema","json_schema":{"schema":{}}})", "response_format.json_schema.name"},
      {R"({"type":"json_schema","json_schema":{"name":"a b"}})", "response_format.json_schema.name"},
      {R"({"type":"json_schema","json_schema":{"name":"a","strict":"yes"}})", "response_format.json_schema.strict"},
      {R"({"type":"json_schema","json_schema":{"name":"a","schema":[]}})", "response_format.json_schema.schema"},
      {R"({"type":"json_schema","json_schema":{"name":"a","extra":1}})", "response_format.json_schema.extra"},
      {R"({"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object",
          "properties":{"d":{"type":"string","format":"date-time"}}}}})",
       "response_format.json_schema.schema"},
  };
  for (const auto& [text, param] : cases) {
    ResponseFormat f;
    std::optional<ApiError> e = Parse(text, &f);
    ASSERT_TRUE(e.has_value()) << text;
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, param) << text << " -> " << e->message;
  }
  ResponseFormat f;
  std::optional<ApiError> e = Parse(cases[10].first, &f);
  EXPECT_NE(e->message.find("/properties/d: unsupported keyword \"format\""), std::string::npos) << e->message;
}

TEST(ResponseFormatTest, ApplySetsTheCompiledGrammarOnce) {
  auto tok = tokenizer::Tokenizer::LoadFromDir(::tandem::testing::TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto cache = MakeGrammarCache(**tok);
  ResponseFormat f;
  ASSERT_FALSE(Parse(R"({"type":"json_object"})", &f));
  engine::SamplingParams a, b;
  EXPECT_FALSE(ApplyResponseFormat(f, cache.get(), &a));
  EXPECT_FALSE(ApplyResponseFormat(f, cache.get(), &b));
  ASSERT_NE(a.grammar, nullptr);
  EXPECT_EQ(a.grammar, b.grammar);  // compiled once, shared
  EXPECT_EQ(cache->size(), 1u);
  grammar::GrammarMatcher m(a.grammar);
  EXPECT_TRUE(m.AcceptToken(*(*tok)->TokenId("{\"")));
  EXPECT_FALSE(m.AcceptToken(*(*tok)->TokenId("<|im_end|>")));  // eos: not complete yet
  // Text needs no grammar; without a tokenizer a JSON format is refused.
  ResponseFormat text;
  engine::SamplingParams c;
  EXPECT_FALSE(ApplyResponseFormat(text, nullptr, &c));
  EXPECT_EQ(c.grammar, nullptr);
  std::optional<ApiError> e = ApplyResponseFormat(f, nullptr, &c);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "response_format");
}

}  // namespace
}  // namespace tandem::openai
