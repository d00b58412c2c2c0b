// The promtool helper itself: a clean exposition comes back "", a broken one with promtool's
// findings, so the exporters' tests that lean on it could fail.
#include "tests/common/promtool.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace tandem::testing {
namespace {

TEST(PromtoolTest, CleanTextPassesAndBrokenTextIsReported) {
  const std::optional<std::string> clean = PromtoolFindings(
      "# HELP tandem_requests_total Requests served.\n"
      "# TYPE tandem_requests_total counter\n"
      "tandem_requests_total{code=\"200\"} 3\n");
  if (!clean) GTEST_SKIP() << "promtool not installed";
  EXPECT_EQ(*clean, "");
  // A counter without the _total suffix is a lint finding (exit 3), a sample without a number a
  // parse error: both must come back as text naming the problem.
  const std::optional<std::string> lint = PromtoolFindings(
      "# HELP tandem_requests Requests served.\n"
      "# TYPE tandem_requests counter\n"
      "tandem_requests 3\n");
  ASSERT_TRUE(lint.has_value());
  std::printf("lint finding: %s\n", lint->c_str());
  EXPECT_NE(lint->find("_total"), std::string::npos) << *lint;
  const std::optional<std::string> broken = PromtoolFindings("tandem_requests_total{code=\"200\"} three\n");
  ASSERT_TRUE(broken.has_value());
  std::printf("parse error: %s\n", broken->c_str());
  EXPECT_NE(broken->find("promtool failed"), std::string::npos) << *broken;
}

}  // namespace
}  // namespace tandem::testing
