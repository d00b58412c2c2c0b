// Built-in filters and tests; the expected texts are what @huggingface/jinja renders for the
// same templates (for the filters it has), or Python Jinja's results (for the ones it lacks).
#include "engine/tokenizer/jinja/filters.h"

#include <gtest/gtest.h>

#include "tests/engine/tokenizer/jinja/render_util.h"

namespace tandem::jinja {
namespace {

using ::tandem::jinja::testing::Fails;
using ::tandem::jinja::testing::R;
using Json = nlohmann::ordered_json;

TEST(JinjaFilters, StringCase) {
  EXPECT_EQ(R("{{ '  a b  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello wORLD foo_bar' | title }}|{{ 'hELLO' | capitalize }}"),
            "a b|ABC|abc|Hello WORLD Foo_bar|HELLO");
  EXPECT_EQ(R("{{ 'ÉCOLE' | lower }}"), "école");
}

TEST(JinjaFilters, LengthFirstLastJoin) {
  const Json ctx = {{"xs", {3, 1, 2}}, {"d", {{"a", 1}}}};
  EXPECT_EQ(R("{{ xs | length }} {{ 'héllo' | length }} {{ d | length }} {{ xs | first }} {{ xs | last }} {{ xs | count }}", ctx),
            "3 5 1 3 2 3");
  EXPECT_EQ(R("{{ xs | join(', ') }}|{{ xs | join }}|{{ ['a', none, 1] | join('-') }}", ctx), "3, 1, 2|312|a--1");
  EXPECT_EQ(R("{{ '😀' | length }}"), "2");  // UTF-16 code units, as JavaScript counts
}

TEST(JinjaFilters, Replace) {
  EXPECT_EQ(R("{{ 'a-b-a' | replace('a', 'x') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'ab' | replace('', '.') }}"), "x-b-x|bba|.a.b.");
}

TEST(JinjaFilters, ToJsonFormatsLikeTheReference) {
  EXPECT_EQ(R("{{ {'b': 1, 'a': [1, 2.5, 'é\"\\n']} | tojson }}"), "{\"b\": 1, \"a\": [1, 2.5, \"é\\\"\\n\"]}");
  EXPECT_EQ(R("{{ {'b': 1, 'a': [1, {}], 'c': []} | tojson(indent=2) }}"), "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    {}\n  ],\n  \"c\": []\n}");
  EXPECT_EQ(R("{{ {'b': 'é', 'a': 1} | tojson(ensure_ascii=true, sort_keys=true) }}|{{ [1,2] | tojson(separators=[',', ':']) }}"),
            "{\"a\": 1, \"b\": \"\\u00e9\"}|[1,2]");
  // Whole numbers from JSON are integers (JavaScript has one number type); undefined is null.
  EXPECT_EQ(R("{{ x | tojson }} {{ nothing | tojson }}", {{"x", {1.0, 2.5}}}), "[1, 2.5] null");
  EXPECT_TRUE(Fails("{{ 1 | tojson(indent='x') }}"));
}

TEST(JinjaFilters, Conversions) {
  EXPECT_EQ(R("{{ 3 | string }}{{ 2.0 | string }}{{ [1] | string }}{{ true | string }}"), "32.0[1]true");
  EXPECT_EQ(R("{{ '42abc' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ -3.9 | int }} {{ '2.5e1x' | float }} {{ 2 | float }} {{ true | int }}"),
            "42 0 7 3 -3 25.0 2.0 1");
  EXPECT_EQ(R("{{ -3 | abs }} {{ -2.5 | abs }} {{ x | safe }} {{ x | e }} {{ 2.567 | round(2) }} {{ 2.5 | round }}", {{"x", "<b>"}}),
            "3 2.5 <b> &lt;b&gt; 2.57 3.0");
}

TEST(JinjaFilters, Default) {
  EXPECT_EQ(R("{{ x | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ none | default('d') }}|{{ y | d('z') }}"), "d||d||z");
}

TEST(JinjaFilters, DictFilters) {
  const Json ctx = {{"d", {{"b", 2}, {"a", 1}, {"C", 3}}}};
  EXPECT_EQ(R("{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}|{{ d | dictsort }}|{{ d | dictsort(reverse=true) }}", ctx),
            "b2a1C3|[[\"a\", 1], [\"b\", 2], [\"C\", 3]]|[[\"C\", 3], [\"b\", 2], [\"a\", 1]]");
  EXPECT_EQ(R("{{ d | list }}", ctx), "[\"b\", \"a\", \"C\"]");
}

TEST(JinjaFilters, SelectMapAndFriends) {
  const Json ctx = {{"xs", {{{"n", 1}}, {{"n", 2}}, {{"n", 0}}, {{"m", 5}}}}};
  EXPECT_EQ(R("{{ xs | map(attribute='n') | list }}", ctx), "[1, 2, 0, undefined]");
  EXPECT_EQ(R("{{ xs | selectattr('n') | map(attribute='n') | join(',') }}|{{ xs | rejectattr('n') | length }}", ctx), "1,2|2");
  EXPECT_EQ(R("{{ xs | selectattr('n', 'odd') | length }}", ctx), "1");
  EXPECT_EQ(R("{{ [1, 2, 3, 4] | select('odd') | list }} {{ [0, 1, '', 'a'] | reject | list }} {{ ['a', 'b'] | map('upper') | join }}"),
            "[1, 3] [0, \"\"] AB");
  EXPECT_EQ(R("{{ [1, 2, 1, 'a', 'a'] | unique }} {{ [3, 1, 2] | reverse }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }}"),
            "[1, 2, \"a\"] [2, 1, 3] [\"A\", \"b\", \"c\"] [3, 2, 1]");
  EXPECT_EQ(R("{{ xs | sort(attribute='n') | map(attribute='n') | join(',') }}", {{"xs", {{{"n", 2}}, {{"n", 1}}, {{"n", 3}}}}}), "1,2,3");
  EXPECT_TRUE(Fails("{{ [1, 'a'] | sort }}"));
}

TEST(JinjaFilters, IndentWordcountSplit) {
  EXPECT_EQ(R("{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent('> ', blank=true) }}"),
            "a\n    b\n\n    c|  a\n  b|a\n> \n> b");
  EXPECT_EQ(R("{{ 'one two  three' | wordcount }} {{ 'a,b' | split(',') }}"), "3 [\"a\", \"b\"]");
}

TEST(JinjaFilters, UnknownFilterFailsAtParse) {
  auto t = Template::Parse("line one\n{{ x | frobnicate }}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 2"), absl::string_view::npos) << t.status();
  EXPECT_NE(t.status().message().find("frobnicate"), absl::string_view::npos) << t.status();
}

TEST(JinjaTests, TypeAndValueTests) {
  EXPECT_EQ(R("{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1.5 is integer }} "
              "{{ 2 is integer }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ {} is iterable }} {{ [] is sequence }} "
              "{{ true is boolean }} {{ true is true }} {{ 0 is false }} {{ 3 is odd }} {{ 3 is even }} {{ 'ab' is lower }} "
              "{{ 'AB' is upper }} {{ x is not none }}",
              {{"x", 1}}),
            "true true true true true false true true true true false true true true false true false true true true");
  EXPECT_EQ(R("{{ 2 is equalto(2) }} {{ 2 is eq 3 }} {{ 'b' is in(['a', 'b']) }} {{ 9 is divisibleby(3) }} {{ 1.5 is float }} {{ range is callable }}"),
            "true false true true true true");
  EXPECT_TRUE(Fails("{{ 'a' is odd }}"));
  EXPECT_TRUE(Fails("{{ 1 is frobnicated }}"));
}

TEST(JinjaCompare, OrdersNumbersAndStrings) {
  EXPECT_LT(*CompareValues(Value::Int(1), Value::Float(1.5), false), 0);
  EXPECT_EQ(*CompareValues(Value::String("abc"), Value::String("ABC"), false), 0);
  EXPECT_GT(*CompareValues(Value::String("abc"), Value::String("ABC"), true), 0);
  EXPECT_FALSE(CompareValues(Value::String("a"), Value::Int(1), false).ok());
}

}  // namespace
}  // namespace tandem::jinja
