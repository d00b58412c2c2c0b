// tandem-infer's command-line helpers that need no model: the id-list parser behind --prompt-ids.
#include "infer/infer.h"

#include <gtest/gtest.h>

namespace tandem::infer {
namespace {

TEST(InferTest, ParseIdList) {
  EXPECT_EQ(*ParseIdList("1,2,3"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(*ParseIdList("17"), (std::vector<int32_t>{17}));
  EXPECT_FALSE(ParseIdList("1,,2").ok());
  EXPECT_FALSE(ParseIdList("1,x").ok());
  EXPECT_FALSE(ParseIdList("-1").ok());
  EXPECT_FALSE(ParseIdList("").ok());
}

}  // namespace
}  // namespace tandem::infer
