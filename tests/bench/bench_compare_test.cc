#include "bench/bench_compare.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/bench/synthetic_results.h"

namespace tandem::bench {
namespace {

using testing::ResultsAt;

const FigureComparison& Find(const std::vector<FigureComparison>& c, const std::string& category, Figure f) {
  for (const FigureComparison& x : c) {
    if (x.category == category && x.figure == f) return x;
  }
  ADD_FAILURE() << "no comparison of " << category << " " << FigureLabel(f);
  static const FigureComparison kNone;
  return kNone;
}

// Two benches of one configuration: the three runs (56.6, 51.7, 51.9) and three more
// from the same noise. Their headlines differ by 1.0 tok/s, inside A's 4.9 spread.
TEST(BenchCompare, SameConfigurationIsNotDistinguishable) {
  const BenchResults a = ResultsAt({56.6, 51.7, 51.9}, 50);
  const BenchResults b = ResultsAt({52.9, 55.0, 51.8}, 50);
  const std::vector<FigureComparison> c = CompareResults(a, b);
  ASSERT_EQ(c.size(), 3 * kFigures.size());  // overall, code, zh
  for (const FigureComparison& x : c) {
    EXPECT_EQ(x.verdict, CompareVerdict::kNotDistinguishable) << x.category << " " << FigureLabel(x.figure);
  }
  const FigureComparison& rate = Find(c, "overall", Figure::kDecodeTokS);
  EXPECT_NEAR(rate.difference, 1.0, 1e-9);
  const std::string text = FormatComparison(c, a, b);
  EXPECT_NE(text.find("overall decode tok/s: A 51.9 [51.7-56.6] B 52.9 [51.8-55] +1.9%: not distinguishable"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("faster"), std::string::npos) << text;
}

// B decodes twice as fast: faster in tok/s and in e2e (lower is better there), the same tokens.
TEST(BenchCompare, LargeDifferenceSaysWhichIsFaster) {
  const BenchResults a = ResultsAt({50, 51, 49}, 80);
  const BenchResults b = ResultsAt({100, 101, 99}, 40);
  const std::vector<FigureComparison> c = CompareResults(a, b);
  EXPECT_EQ(Find(c, "overall", Figure::kDecodeTokS).verdict, CompareVerdict::kBBetter);
  EXPECT_EQ(Find(c, "zh", Figure::kE2eMs).verdict, CompareVerdict::kBBetter);
  EXPECT_EQ(Find(c, "code", Figure::kTtftMs).verdict, CompareVerdict::kBBetter);
  EXPECT_EQ(Find(c, "overall", Figure::kTokens).verdict, CompareVerdict::kNotDistinguishable);
  EXPECT_NEAR(Find(c, "overall", Figure::kDecodeTokS).difference_pct, 100, 1e-9);
  const std::string text = FormatComparison(c, a, b);
  EXPECT_NE(text.find("overall decode tok/s: A 50 [49-51] B 100 [99-101] +100.0%: B faster (the difference 50 "
                      "exceeds both spreads, A 2 and B 2)"),
            std::string::npos)
      << text;
  // The other way round, A is the faster one.
  const std::vector<FigureComparison> back = CompareResults(b, a);
  EXPECT_EQ(Find(back, "overall", Figure::kDecodeTokS).verdict, CompareVerdict::kABetter);
  EXPECT_EQ(Find(back, "overall", Figure::kE2eMs).verdict, CompareVerdict::kABetter);
  EXPECT_NE(FormatComparison(back, b, a).find("A faster"), std::string::npos);
}

// A difference larger than B's spread but inside A's is still not distinguishable.
TEST(BenchCompare, EitherSpreadCoversTheDifference) {
  const std::vector<FigureComparison> c = CompareResults(ResultsAt({40, 50, 60}), ResultsAt({55, 55.5, 56}));
  const FigureComparison& rate = Find(c, "overall", Figure::kDecodeTokS);
  EXPECT_EQ(rate.verdict, CompareVerdict::kNotDistinguishable);
  EXPECT_NE(FormatComparison(c, ResultsAt({40, 50, 60}), ResultsAt({55, 55.5, 56})).find("within the spread of A"),
            std::string::npos);
}

TEST(BenchCompare, SingleRunsAndDifferentSetupsAreNoted) {
  BenchResults a = ResultsAt({50});
  BenchResults b = ResultsAt({50.5});
  b.max_tokens = 64;
  const std::vector<FigureComparison> c = CompareResults(a, b);
  EXPECT_EQ(Find(c, "overall", Figure::kDecodeTokS).verdict, CompareVerdict::kBBetter);
  const std::string text = FormatComparison(c, a, b);
  EXPECT_NE(text.find("note: a side has a single run"), std::string::npos) << text;
  EXPECT_NE(text.find("note: the setups differ"), std::string::npos) << text;
  const std::string json = FormatComparisonJson(c);
  EXPECT_NE(json.find("\"verdict\": \"B faster\""), std::string::npos) << json;
}

TEST(BenchCompare, CategoriesOnOneSideOnlyAreLeftOut) {
  BenchResults a = ResultsAt({50, 51, 52});
  BenchResults b = ResultsAt({50, 51, 52});
  for (auto& run : b.runs) {
    for (PromptSample& s : run) {
      if (s.category == "zh") s.category = "english";
    }
  }
  for (const FigureComparison& x : CompareResults(a, b)) {
    EXPECT_NE(x.category, "zh");
    EXPECT_NE(x.category, "english");
  }
}

}  // namespace
}  // namespace tandem::bench
