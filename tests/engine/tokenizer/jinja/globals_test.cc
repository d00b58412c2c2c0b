#include "engine/tokenizer/jinja/globals.h"

#include <ctime>
#include <string>

#include <gtest/gtest.h>

#include "tests/engine/tokenizer/jinja/render_util.h"

namespace tandem::jinja {
namespace {

using ::tandem::jinja::testing::Fails;
using ::tandem::jinja::testing::R;

TEST(JinjaGlobals, Range) {
  EXPECT_EQ(R("{{ range(3) }} {{ range(1, 4) }} {{ range(5, 0, -2) }} {{ range(0) }}"), "[0, 1, 2] [1, 2, 3] [5, 3, 1] []");
  EXPECT_TRUE(Fails("{{ range(1, 2, 0) }}"));
  EXPECT_TRUE(Fails("{{ range('a') }}"));
}

TEST(JinjaGlobals, Namespace) {
  EXPECT_EQ(R("{% set ns = namespace(a=1, b='x') %}{{ ns.a }}{{ ns.b }}{{ ns }}"), "1x{\"a\": 1, \"b\": \"x\"}");
  EXPECT_EQ(R("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a + ns.b }}"), "3");
  EXPECT_TRUE(Fails("{{ namespace(1) }}"));
}

TEST(JinjaGlobals, Constants) { EXPECT_EQ(R("{{ true }}{{ True }}{{ false }}{{ False }}[{{ none }}{{ None }}]"), "truetruefalsefalse[]"); }

TEST(JinjaGlobals, StrftimeNow) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  const std::string out = R("{{ strftime_now('%Y|%%|%q') }}");
  EXPECT_EQ(out, std::to_string(tm.tm_year + 1900) + "|%|%q");
  EXPECT_EQ(R("{{ strftime_now('%d %B %Y') }}").size(), std::string("01 ").size() + R("{{ strftime_now('%B') }}").size() + 5);
}

TEST(JinjaGlobals, RaiseExceptionCarriesTheMessage) {
  auto out = ::tandem::jinja::testing::Render("{% if x %}{{ raise_exception('Only user and assistant roles') }}{% endif %}", {{"x", true}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), std::string(kRaisedPrefix) + "Only user and assistant roles");
}

}  // namespace
}  // namespace tandem::jinja
