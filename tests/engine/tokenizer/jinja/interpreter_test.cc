// Statements and operators of the interpreter, rendered through whole templates; the expected
// texts are what @huggingface/jinja renders for the same templates.
#include "engine/tokenizer/jinja/interpreter.h"

#include <gtest/gtest.h>

#include "tests/engine/tokenizer/jinja/render_util.h"

namespace tandem::jinja {
namespace {

using ::tandem::jinja::testing::Fails;
using ::tandem::jinja::testing::R;
using ::tandem::jinja::testing::Render;
using Json = nlohmann::ordered_json;

TEST(JinjaInterpreter, IfElifElse) {
  const char* t = "{% if x > 2 %}big{% elif x == 2 %}two{% else %}small{% endif %}";
  EXPECT_EQ(R(t, {{"x", 3}}), "big");
  EXPECT_EQ(R(t, {{"x", 2}}), "two");
  EXPECT_EQ(R(t, {{"x", 1}}), "small");
}

TEST(JinjaInterpreter, ForWithLoopVariables) {
  EXPECT_EQ(R("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
              "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
              {{"xs", {"a", "b"}}}),
            "1021truefalse2|2110falsetrue2|");
  EXPECT_EQ(R("{% for x in xs %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}", {{"xs", {1, 2, 3}}}),
            "<1>2;1<2>3;2<3>;");
}

TEST(JinjaInterpreter, ForElseFilterAndUnpacking) {
  EXPECT_EQ(R("{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", {{"xs", Json::array()}}), "empty");
  EXPECT_EQ(R("{% for x in xs if x is odd %}{{ x }}{{ loop.length }}{% endfor %}", {{"xs", {1, 2, 3, 4, 5}}}), "133353");
  EXPECT_EQ(R("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}), "b=1;a=2;");
  EXPECT_EQ(R("{% for k in d %}{{ k }}{% endfor %}", {{"d", {{"x", 1}, {"y", 2}}}}), "xy");
  EXPECT_EQ(R("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}"), "3,7,");
  EXPECT_TRUE(Fails("{% for a, b in [[1, 2, 3]] %}{% endfor %}"));
}

TEST(JinjaInterpreter, BreakContinueDropTheIterationText) {
  // As in the reference, an iteration left by break/continue adds nothing, not even the text
  // before the statement.
  EXPECT_EQ(R("{% for x in [1, 2, 3, 4] %}<{% if x == 2 %}{% continue %}{% endif %}{{ x }}>{% if x == 3 %}{% break %}{% endif %}{% endfor %}"),
            "<1>");
  EXPECT_EQ(R("{% for x in [1, 2] %}{% continue %}{% else %}none ran{% endfor %}"), "none ran");
}

TEST(JinjaInterpreter, SetScopesAndNamespaces) {
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(R("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"), "4");
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(R("{% set block %}hello {{ 1 + 1 }}{% endset %}[{{ block }}]"), "[hello 2]");
  EXPECT_EQ(R("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_TRUE(Fails("{% set d = {} %}{% set d.x = 1 %}"));
}

TEST(JinjaInterpreter, MacrosAndCallBlocks) {
  EXPECT_EQ(R("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', punct='?') }}"),
            "Hi Ann! Hi Bo?");
  EXPECT_EQ(R("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold{% endcall %}"),
            "<b>bold</b>");
  EXPECT_EQ(R("{% macro list() %}{{ varargs | length }}{{ kwargs.x }}{% endmacro %}{{ list(1, 2, x=3) }}"), "23");
  EXPECT_TRUE(Fails("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"));
  EXPECT_TRUE(Fails("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"));
  // A macro sees the variables of where it was defined, including later assignments there.
  EXPECT_EQ(R("{% macro show() %}{{ v }}{% endmacro %}{% set v = 7 %}{{ show() }}"), "7");
}

TEST(JinjaInterpreter, FilterBlock) { EXPECT_EQ(R("{% filter upper %}abc {{ 'd' }}{% endfilter %}"), "ABC D"); }

TEST(JinjaInterpreter, Arithmetic) {
  EXPECT_EQ(R("{{ 1 + 2 }} {{ 7 - 10 }} {{ 2 * 3.5 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}"),
            "3 -3 7.0 3.5 3 -4 1 1024");
  EXPECT_EQ(R("{{ 4 / 2 }} {{ 1.5 + 1.5 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }}"), "2.0 3.0 0.30000000000000004 2.5");
  EXPECT_EQ(R("{{ -x }} {{ +x }} {{ -(2) }}", {{"x", 3}}), "-3 3 -2");
}

TEST(JinjaInterpreter, StringOperators) {
  EXPECT_EQ(R("{{ 'a' + 'b' }} {{ 'a' ~ 1 ~ true }} {{ 'n=' + 2 }} {{ x ~ 'y' }}"), "ab a1true n=2 y");
  EXPECT_EQ(R("{{ 'ell' in 'hello' }} {{ 'z' not in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'a' in undefined_name }}"),
            "true true true true false");
}

TEST(JinjaInterpreter, ComparisonsAndLogic) {
  EXPECT_EQ(R("{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 1 == 1.0 }} {{ 'a' == 'a' }} {{ 'a' != 'b' }}"),
            "true true false true true true");
  EXPECT_EQ(R("{{ none == undefined_name }} {{ 1 == true }} {{ '1' == 1 }} {{ [1] == [1] }}"), "true true true false");
  EXPECT_EQ(R("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ [] or 'e' }} {{ not 0 }} {{ not 1 == 2 }}"), "x y e true true");
  EXPECT_EQ(R("{{ 'yes' if x else 'no' }}{{ 'a' if false }}", {{"x", true}}), "yes");
}

TEST(JinjaInterpreter, LiteralsAndAccess) {
  EXPECT_EQ(R("{{ [1, 'a', none, true] }} {{ {'k': [1, {'n': none}]} }} {{ (1, 2)[1] }}"), "[1, \"a\", null, true] {\"k\": [1, {\"n\": null}]} 2");
  // `null` is no keyword: an undefined name, which a printed dict shows as JavaScript does.
  EXPECT_EQ(R("{{ {'n': null} }}"), "{\"n\": undefined}");
  EXPECT_EQ(R("{{ d.a.b }}{{ d['a']['b'] }}{{ xs[0] }}{{ xs[-1] }}{{ xs.1 }}", {{"d", {{"a", {{"b", 5}}}}}, {"xs", {1, 2, 3}}}), "55132");
  EXPECT_EQ(R("{{ xs[1:] }} {{ xs[::-1] }} {{ xs[:2] }} {{ 'hello'[1:3] }} {{ 'abc'[::-1] }}", {{"xs", {1, 2, 3}}}),
            "[2, 3] [3, 2, 1] [1, 2] el cba");
  EXPECT_EQ(R("{{ True }}{{ False }}{{ None }}|{{ none }}"), "truefalse|");
}

TEST(JinjaInterpreter, UndefinedPrintsNothingAndIsFalsy) {
  EXPECT_EQ(R("[{{ nothing }}][{{ nothing.attr }}][{% if nothing %}t{% else %}f{% endif %}]"), "[][][f]");
  EXPECT_EQ(R("{% for x in nothing %}x{% else %}none{% endfor %}"), "none");
}

TEST(JinjaInterpreter, RaiseException) {
  auto out = Render("{{ raise_exception('bad roles') }}");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("bad roles"), absl::string_view::npos);
}

TEST(JinjaInterpreter, RunawayTemplatesAreBounded) {
  TemplateOptions small;
  small.limits.max_output_bytes = 1000;
  small.limits.max_steps = 100000;
  EXPECT_EQ(Render("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", Json::object(), small).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", Json::object(), small).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Render("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", Json::object(), small)
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(Render("{{ range(100000000) | length }}").ok());
}

TEST(JinjaInterpreter, SelfReferencingNamespaceIsFreed) {
  // LSan (the sanitizer build) would report the cycle if the namespace were not emptied.
  EXPECT_EQ(R("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"), "true");
}

}  // namespace
}  // namespace tandem::jinja
