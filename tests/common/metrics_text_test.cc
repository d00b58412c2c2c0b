// The exposition checker itself: it must catch each broken rule, or the exporters' tests that
// lean on it could not fail.
#include "tests/common/metrics_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::testing {
namespace {

constexpr const char* kGood =
    "# HELP a_total Things.\n"
    "# TYPE a_total counter\n"
    "a_total{node=\"x y\",why=\"say \\\"}\\\"\"} 3\n"
    "# HELP lat Latency.\n"
    "# TYPE lat histogram\n"
    "lat_bucket{le=\"0.5\"} 1\n"
    "lat_bucket{le=\"+Inf\"} 2\n"
    "lat_sum 1.25\n"
    "lat_count 2\n"
    "# HELP g A gauge.\n"
    "# TYPE g gauge\n"
    "g 0 1700000000000\n"
    "# HELP up Unbounded.\n"
    "# TYPE up gauge\n"
    "up +Inf\n";

TEST(MetricsTextTest, AWellFormedTextPasses) {
  EXPECT_EQ(ExpositionProblems(kGood), Problems{});
  EXPECT_EQ(SeriesValue(kGood, "a_total{node=\"x y\",why=\"say \\\"}\\\"\"}"), 3);
  EXPECT_EQ(SeriesValue(kGood, "lat_sum"), 1.25);
  EXPECT_EQ(SeriesValue(kGood, "lat_bucket{le=\"+Inf\"}"), 2);
  ASSERT_TRUE(SeriesValue(kGood, "up").has_value());
  EXPECT_TRUE(std::isinf(*SeriesValue(kGood, "up")));
  EXPECT_EQ(SeriesValue(kGood, "g"), 0);
  EXPECT_EQ(SeriesValue(kGood, "a_total"), std::nullopt) << "the series is the name with its labels";
  EXPECT_EQ(SeriesValue(kGood, "nope"), std::nullopt);
  EXPECT_EQ(SeriesMismatches(kGood, {{"lat_sum", 1.25}, {"g", 0}}), Problems{});
  EXPECT_EQ(SeriesMismatches(kGood, {{"lat_sum", 1}, {"g", 0}, {"nope", 2}}),
            (Problems{"lat_sum: want 1, got 1.25", "nope: want 2, absent"}));
}

TEST(MetricsTextTest, EachBrokenRuleIsReported) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"# HELP c Count.\n# TYPE c counter\nc 1\n", "c: a counter not ending in _total"},
      {"# HELP b_total Bytes.\n# TYPE b_total gauge\nb_total 1\n", "b_total: a gauge ending in _total"},
      {"# TYPE g gauge\ng 1\n", "g: no HELP before it"},
      {"# HELP g Gauge.\ng 1\n# TYPE g gauge\n", "g: no TYPE before it"},
      {"# HELP g \n# TYPE g gauge\ng 1\n", "g: empty HELP"},
      {"# HELP g A.\n# HELP g B.\n# TYPE g gauge\ng 1\n", "g: HELP given twice"},
      {"# HELP g A.\n# TYPE g gauge\ng one\n", "g: value 'one' is not a number"},
      {"# HELP g A.\n# TYPE g gauge\ng{a=\"1\" 1\n", "not a sample: g{a=\"1\" 1"},
      // A _count without its histogram's declarations is a family of its own, undeclared.
      {"x_count 1\n", "x_count: no HELP before it"},
      {"# HELP h A.\n# TYPE h gauge\n", ""},
  };
  for (const auto& [text, want] : cases) {
    const Problems problems = ExpositionProblems(text);
    if (want.empty()) {
      EXPECT_TRUE(problems.empty()) << text;
      continue;
    }
    ASSERT_FALSE(problems.empty()) << text;
    EXPECT_EQ(problems[0], want) << text;
  }
}

}  // namespace
}  // namespace tandem::testing
