// Attribute access and the built-in methods of strings and dicts; expectations are what
// @huggingface/jinja renders for the same templates.
#include "engine/tokenizer/jinja/methods.h"

#include <gtest/gtest.h>

#include "tests/engine/tokenizer/jinja/render_util.h"

namespace tandem::jinja {
namespace {

using ::tandem::jinja::testing::Fails;
using ::tandem::jinja::testing::R;

TEST(JinjaMethods, StringStripIgnoresItsArgumentAsTheReferenceDoes) {
  // Qwen3's template calls .strip('\n') and .lstrip('\n'); the reference strips all whitespace.
  EXPECT_EQ(R("{{ '  a b  '.strip() }}|{{ '\\n\\nx \\n'.strip('\\n') }}|{{ 'xxay'.lstrip('x') }}|{{ ' a '.rstrip() }}"), "a b|x|xxay| a");
  EXPECT_EQ(R("{{ '\\u00a0a\\u3000'.strip() }}"), "a");
}

TEST(JinjaMethods, StringCaseAndAffixes) {
  EXPECT_EQ(R("{{ 'ab'.upper() }}|{{ 'AB'.lower() }}|{{ 'a b'.title() }}|{{ 'hello'.startswith('he') }}|{{ 'hello'.endswith(('x', 'lo')) }}"),
            "AB|ab|A B|true|true");
  EXPECT_TRUE(Fails("{{ 'a'.startswith(1) }}"));
}

TEST(JinjaMethods, SplitAndReplace) {
  EXPECT_EQ(R("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.split(none, 1) }}"),
            "[\"a\", \"b\", \"\", \"c\"] [\"a\", \"b\"] [\"a\", \"b c\"] [\"a\", \"b c\"]");
  EXPECT_EQ(R("{{ 'x</think>y</think>z'.split('</think>')[-1] }}"), "z");
  EXPECT_EQ(R("{{ 'a-a'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 1) }}"), "b-b baa");
  EXPECT_TRUE(Fails("{{ 'abc'.split('') }}"));
}

TEST(JinjaMethods, DictMethods) {
  const nlohmann::ordered_json ctx = {{"d", {{"a", 1}, {"b", 2}}}, {"xs", {1, 2}}};
  EXPECT_EQ(R("{{ d.get('a') }} {{ d.get('z', 9) }} [{{ d.get('z') }}] {{ d.keys() }} {{ d.values() }} {{ d.items() }} {{ 'abc'.length }} {{ xs.length }}", ctx),
            "1 9 [] [\"a\", \"b\"] [1, 2] [[\"a\", 1], [\"b\", 2]] 3 2");
  // A key shadows the method of the same name.
  EXPECT_EQ(R("{{ d.items }}", {{"d", {{"items", "mine"}}}}), "mine");
}

TEST(JinjaMethods, StringIndexCountsUtf16Units) {
  // As String.prototype.at: an emoji is two units (its surrogate halves), where slices see one.
  EXPECT_EQ(R("{{ 'x\U0001F600y'[1] | length }} {{ 'x\u00e9y'[1] }} {{ 'ab'[-1] }}"), "1 \u00e9 b");
  EXPECT_EQ(R("{{ 'x\U0001F600y'[1] }}"), "\xED\xA0\xBD");  // the high surrogate U+D83D alone
  EXPECT_EQ(R("{{ 'x\U0001F600y'[2] | tojson }}"), "\"\\ude00\"");
}

TEST(JinjaMethods, MissingAttributesAreUndefined) {
  EXPECT_EQ(R("[{{ d.nope }}][{{ xs[5] }}][{{ 'ab'.nope }}][{{ 3.x }}]", {{"d", nlohmann::ordered_json::object()}, {"xs", {1}}}), "[][][][]");
  EXPECT_TRUE(Fails("{{ d[1] }}", {{"d", nlohmann::ordered_json::object()}}));
}

TEST(JinjaSlice, PythonSemantics) {
  const Value xs = Value::Array({Value::Int(1), Value::Int(2), Value::Int(3), Value::Int(4)});
  auto s = SliceValue(xs, Value::Int(-3), Value(), Value::Int(2));
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->items().size(), 2u);
  EXPECT_EQ(s->items()[0].number(), 2);
  EXPECT_EQ(s->items()[1].number(), 4);
  auto str = SliceValue(Value::String("héllo"), Value::Int(1), Value::Int(3), Value());
  ASSERT_TRUE(str.ok());
  EXPECT_EQ(str->str(), "él");
  EXPECT_TRUE(SliceValue(xs, Value(), Value(), Value::Int(0))->items().empty());
  EXPECT_FALSE(SliceValue(Value::Int(3), Value(), Value(), Value()).ok());
}

}  // namespace
}  // namespace tandem::jinja
