// Rendering a preflight report (controller/preflight_output.cc): the JSON scripts read.
#include "controller/preflight_output.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "controller/preflight.h"
#include "tests/controller/preflight_facts.h"

namespace tandem::controller {
namespace {

using testing::Observe;
using testing::SparkFacts;
using testing::Spec;

TEST(PreflightOutput, JsonHasTheDocumentedShape) {
  PreflightReport r = ComparePreflight(Spec(), Observe(SparkFacts("spark1"), SparkFacts("spark2")));
  std::string j = FormatPreflightJson(r, 0.25);
  EXPECT_TRUE(absl::StrContains(j, "\"ok\": true"));
  EXPECT_TRUE(absl::StrContains(j, "\"check\": \"driver-parity\""));
  EXPECT_TRUE(absl::StrContains(j, "\"detail\": \"found: 580.95.05; expected: same on all 2 nodes\""));
  EXPECT_TRUE(absl::StrContains(j, "\"NCCL_IB_GID_INDEX\": \"3\""));
}

}  // namespace
}  // namespace tandem::controller
