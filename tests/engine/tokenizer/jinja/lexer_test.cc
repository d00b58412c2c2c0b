#include "engine/tokenizer/jinja/lexer.h"

#include <gtest/gtest.h>

#include "tests/engine/tokenizer/jinja/render_util.h"

namespace tandem::jinja {
namespace {

using ::tandem::jinja::testing::R;

std::vector<TokenType> Types(const std::vector<Token>& tokens) {
  std::vector<TokenType> out;
  for (const auto& t : tokens) out.push_back(t.type);
  return out;
}

TEST(JinjaLexer, TokensOfATag) {
  auto t = Tokenize("a{{ x.y[0] | f(1, 'q') }}");
  ASSERT_TRUE(t.ok()) << t.status();
  using T = TokenType;
  EXPECT_EQ(Types(*t), (std::vector<T>{T::kText, T::kOpenExpression, T::kIdentifier, T::kDot, T::kIdentifier, T::kOpenBracket,
                                       T::kNumber, T::kCloseBracket, T::kPipe, T::kIdentifier, T::kOpenParen, T::kNumber, T::kComma,
                                       T::kString, T::kCloseParen, T::kCloseExpression}));
}

TEST(JinjaLexer, SignsAreUnaryAfterOperators) {
  auto t = Tokenize("{{ a - 1 }}{{ (-1) }}{{ [-x] }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[2].type, TokenType::kAdditive);
  EXPECT_EQ((*t)[7].value, "-1");
  EXPECT_EQ((*t)[7].type, TokenType::kNumber);
  EXPECT_EQ((*t)[12].type, TokenType::kUnary);
}

TEST(JinjaLexer, StringEscapes) {
  auto t = Tokenize(R"({{ 'a\n\t\'\\\x41\u00e9' }})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)[1].value, "a\n\t'\\A\xC3\xA9");
  EXPECT_FALSE(Tokenize(R"({{ '\q' }})").ok());
  EXPECT_FALSE(Tokenize("{{ 'open }}").ok());
}

TEST(JinjaLexer, WhitespaceControlAsTransformersSetsIt) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: blanks before a block tag at
  // the start of a line go; {{ }} keep their surroundings; a single trailing newline goes.
  EXPECT_EQ(R("  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}\n"), "  x\n  y");
  EXPECT_EQ(R("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(R("a {{- 'b' -}} c {#- comment -#} d"), "abcd");
  EXPECT_EQ(R("{# note #}\nx"), "x");
  EXPECT_EQ(R("x{% generation %}y{% endgeneration %}z"), "xyz");
}

TEST(JinjaLexer, LinesSurvivePreprocessing) {
  auto t = Tokenize("{% if a %}\n{% if b %}\n{{ c }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->back().line, 3);
  auto bad = Tokenize("ok\n{% if a %}\n{{ $ }}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 3"), absl::string_view::npos) << bad.status();
}

}  // namespace
}  // namespace tandem::jinja
