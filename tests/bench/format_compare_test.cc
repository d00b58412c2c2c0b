#include "bench/format_compare.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem::bench {
namespace {

using kernels::WeightFormat;

TEST(FormatCompare, SummarizeTakesTheMiddle) {
  const Spread odd = Summarize({3, 1, 2});
  EXPECT_EQ(odd.median, 2);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 3);
  const Spread even = Summarize({4, 1, 3, 2});
  EXPECT_EQ(even.median, 2.5);
  EXPECT_EQ(even.min, 1);
  EXPECT_EQ(even.max, 4);
}

TEST(FormatCompare, Targets) {
  EXPECT_EQ(TargetSpeedup(WeightFormat::kBf16), 1.0);
  EXPECT_EQ(TargetSpeedup(WeightFormat::kFp8Block), 1.7);
  EXPECT_EQ(TargetSpeedup(WeightFormat::kNvfp4), 2.5);
}

// Three formats at one context, three runs each (ms per step at batch 1): the ratio of the medians,
// its widest range (slowest over fastest bf16 .. fastest over slowest), the byte ratio, and whether
// the target is met. Worked by hand: bf16 tokens/s 95.2, 100, 105.3; fp8 166.7, 181.8, 200 (1.82x,
// 166.7 / 105.3 = 1.58 .. 200 / 95.2 = 2.10); nvfp4 217.4, 222.2, 227.3 (2.22x, 2.07 .. 2.39).
TEST(FormatCompare, RatiosToBf16AgainstTheTargets) {
  const std::vector<DecodePoint> points = {{WeightFormat::kBf16, 1, 1024, {10, 10.5, 9.5}, 6.08e9},
                                           {WeightFormat::kFp8Block, 1, 1024, {5.5, 5.0, 6.0}, 3.37e9},
                                           {WeightFormat::kNvfp4, 1, 1024, {4.5, 4.4, 4.6}, 2.18e9}};
  const std::string t = CompareFormats(points);
  EXPECT_NE(t.find("## batch 1 decode by weight format (this run)"), std::string::npos) << t;
  EXPECT_NE(t.find("| bf16 | 1024 | 100 (95-105) | 6.08 | 1.00x | 1.00x | | |\n"), std::string::npos) << t;
  EXPECT_NE(t.find("| fp8 | 1024 | 182 (167-200) | 3.37 | 1.82x (1.58-2.10) | 1.80x | >= 1.7x | yes |\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("| nvfp4 | 1024 | 222 (217-227) | 2.18 | 2.22x (2.07-2.39) | 2.79x | >= 2.5x | no |\n"),
            std::string::npos)
      << t;
}

// Each format is compared with bf16 at its own context; without a bf16 run the row says so.
TEST(FormatCompare, PerContextAndWithoutBf16) {
  const std::vector<DecodePoint> points = {{WeightFormat::kBf16, 1, 1024, {10}, 6e9},
                                           {WeightFormat::kBf16, 1, 4096, {20}, 6.4e9},
                                           {WeightFormat::kFp8Block, 1, 1024, {5}, 3e9},
                                           {WeightFormat::kFp8Block, 1, 4096, {16}, 3.4e9}};
  const std::string t = CompareFormats(points);
  EXPECT_NE(t.find("| fp8 | 1024 | 200 (200-200) | 3.00 | 2.00x (2.00-2.00) | 2.00x | >= 1.7x | yes |"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("| fp8 | 4096 | 62 (62-62) | 3.40 | 1.25x (1.25-1.25) | 1.88x | >= 1.7x | no |"), std::string::npos)
      << t;
  const std::string alone = CompareFormats({{WeightFormat::kNvfp4, 8, 1024, {8}, 2e9}});
  EXPECT_NE(alone.find("## batch 8 decode"), std::string::npos) << alone;
  EXPECT_NE(alone.find("| nvfp4 | 1024 | 1000 (1000-1000) | 2.00 | (no bf16 run) | | >= 2.5x | |"), std::string::npos)
      << alone;
  EXPECT_EQ(CompareFormats({}), "");
}

}  // namespace
}  // namespace tandem::bench
