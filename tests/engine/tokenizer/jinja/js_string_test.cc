#include "engine/tokenizer/jinja/js_string.h"

#include <cmath>

#include <gtest/gtest.h>

namespace tandem::jinja {
namespace {

TEST(JinjaJsString, TrimUsesJavaScriptWhitespace) {
  EXPECT_EQ(JsTrim("\xC2\xA0 \t\n a b \xE3\x80\x80\xEF\xBB\xBF"), "a b");
  EXPECT_EQ(JsTrimStart("  a  "), "a  ");
  EXPECT_EQ(JsTrimEnd("  a \xE2\x80\xA8"), "  a");
  EXPECT_EQ(JsTrim("\xE2\x80\x8B"), "\xE2\x80\x8B");  // U+200B is not whitespace to JavaScript
}

TEST(JinjaJsString, LengthCountsUtf16Units) {
  EXPECT_EQ(JsLength("abc"), 3u);
  EXPECT_EQ(JsLength("h\xC3\xA9"), 2u);
  EXPECT_EQ(JsLength("\xF0\x9F\x98\x80"), 2u);
}

TEST(JinjaJsString, CaseMapping) {
  EXPECT_EQ(JsToUpper("abc \xC3\xA9"), "ABC \xC3\x89");
  EXPECT_EQ(JsTitle("hello wORLD 9am _x"), "Hello WORLD 9am _x");
  EXPECT_EQ(JsCapitalize("\xC3\xA9t\xC3\xA9 X"), "\xC3\x89t\xC3\xA9 X");
  // JavaScript's full mappings: ß and ligatures grow, İ gains a combining dot, a word-final
  // capital sigma lowers to ς.
  EXPECT_EQ(JsToUpper("stra\xC3\x9F""e \xEF\xAC\x81"), "STRASSE FI");
  EXPECT_EQ(JsToLower("\xC4\xB0"), "i\xCC\x87");
  EXPECT_EQ(JsToLower("\xCE\xA3\xCE\x91\xCE\xA3 \xCE\xA3"), "\xCF\x83\xCE\xB1\xCF\x82 \xCF\x83");
}

TEST(JinjaJsString, NumberParsing) {
  EXPECT_EQ(*JsParseInt("  42abc"), 42);
  EXPECT_EQ(*JsParseInt("-7"), -7);
  EXPECT_FALSE(JsParseInt("abc").has_value());
  EXPECT_EQ(*JsParseFloat("2.5e1x"), 25);
  EXPECT_EQ(*JsParseFloat(".5"), 0.5);
  EXPECT_FALSE(JsParseFloat("e5").has_value());
  EXPECT_EQ(JsStringToNumber(" 12 "), 12);
  EXPECT_EQ(JsStringToNumber(""), 0);
  EXPECT_EQ(JsStringToNumber("0x10"), 16);
  EXPECT_TRUE(std::isnan(JsStringToNumber("1a")));
}

TEST(JinjaJsString, JsonStrings) {
  std::string out;
  AppendJsonString(out, "a\"\\\n\x01\x7f\xC3\xA9\xF0\x9F\x98\x80", false);
  EXPECT_EQ(out, "\"a\\\"\\\\\\n\\u0001\x7f\xC3\xA9\xF0\x9F\x98\x80\"");
  out.clear();
  AppendJsonString(out, "\x7f\xC3\xA9\xF0\x9F\x98\x80", true);
  EXPECT_EQ(out, "\"\\u007f\\u00e9\\ud83d\\ude00\"");
}

}  // namespace
}  // namespace tandem::jinja
