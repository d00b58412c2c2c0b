#include "engine/tokenizer/jinja/parser.h"

#include <string>

#include <gtest/gtest.h>

#include "tests/engine/tokenizer/jinja/render_util.h"

namespace tandem::jinja {
namespace {

using ::tandem::jinja::testing::R;

absl::StatusOr<std::vector<NodePtr>> ParseText(const std::string& text) {
  auto tokens = Tokenize(text);
  if (!tokens.ok()) return tokens.status();
  return Parse(*tokens);
}

std::string ErrorOf(const std::string& text) {
  auto p = ParseText(text);
  return p.ok() ? "ok" : std::string(p.status().message());
}

TEST(JinjaParser, BuildsStatements) {
  auto p = ParseText("a{% for x in xs if x %}{{ x }}{% else %}e{% endfor %}");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 2u);
  const Node& f = *(*p)[1];
  EXPECT_EQ(f.kind, NodeKind::kFor);
  EXPECT_EQ(f.a->text, "x");
  ASSERT_NE(f.c, nullptr);  // the `if` filter
  EXPECT_EQ(f.list.size(), 1u);
  EXPECT_EQ(f.list2.size(), 1u);
}

TEST(JinjaParser, PrecedenceOfTheReference) {
  // `not` takes the whole comparison; filters bind tighter than arithmetic; tests than `*`.
  EXPECT_EQ(R("{{ not 1 == 2 }} {{ [1, 2] | length - 1 }} {{ 2 ** 3 ** 2 }} {{ 1 + 2 * 3 }}"), "true 1 64 7");
  EXPECT_TRUE(::tandem::jinja::testing::Fails("{{ 2 * 3 is odd }}"));  // 2 * (3 is odd): a number times a boolean
  EXPECT_EQ(R("{{ 'a' if false else 'b' if true else 'c' }}"), "b");
}

TEST(JinjaParser, ErrorsNameTheConstructAndLine) {
  EXPECT_NE(ErrorOf("x\n{% include 'other' %}").find("line 2: unsupported statement {% include %}"), std::string::npos)
      << ErrorOf("x\n{% include 'other' %}");
  EXPECT_NE(ErrorOf("{% if x %}\nno end").find("missing {% endif %} for the if on line 1"), std::string::npos)
      << ErrorOf("{% if x %}\nno end");
  EXPECT_NE(ErrorOf("{{ x | nosuch }}").find("unsupported filter 'nosuch'"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ x is nosuch }}").find("unsupported test 'is nosuch'"), std::string::npos);
  EXPECT_NE(ErrorOf("{% for 1 in xs %}{% endfor %}").find("for"), std::string::npos);
  EXPECT_NE(ErrorOf("{% macro m(a=1, b) %}{% endmacro %}").find("default"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ f(a=1, 2) }}").find("positional"), std::string::npos);
  EXPECT_NE(ErrorOf("{% endfor %}").find("unsupported statement"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ x[] }}").find("empty subscript"), std::string::npos);
}

TEST(JinjaParser, NestingIsBounded) {
  std::string deep(200, '(');
  deep = "{{ " + deep + "1" + std::string(200, ')') + " }}";
  EXPECT_NE(ErrorOf(deep).find("nested too deep"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 100; ++i) ifs += "{% if x %}";
  EXPECT_NE(ErrorOf(ifs).find("nested too deep"), std::string::npos);
  EXPECT_EQ(ErrorOf("{{ ((((1)))) }}"), "ok");
}

}  // namespace
}  // namespace tandem::jinja
