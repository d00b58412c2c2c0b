#include "bench/serve_stats.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/bench/synthetic_results.h"

namespace tandem::bench {
namespace {

using testing::ResultsAt;
using testing::SampleAt;

TEST(ServeStats, DecodeRateLeavesOutTheFirstToken) {
  PromptSample s;
  s.ok = true;
  s.tokens = 11;
  s.ttft_ms = 100;
  s.e2e_ms = 600;  // 10 tokens in 0.5 s after the first
  EXPECT_DOUBLE_EQ(*DecodeTokensPerSecond(s), 20.0);
  s.tokens = 1;
  EXPECT_FALSE(DecodeTokensPerSecond(s).has_value());
  s.tokens = 11;
  s.ok = false;
  EXPECT_FALSE(DecodeTokensPerSecond(s).has_value());
}

// The issue's three runs: the headline is the middle one, never the best.
TEST(ServeStats, HeadlineIsTheMedianOfRunMedians) {
  const FigureSummary s = SummarizeFigure({56.6, 51.7, 51.9});
  EXPECT_DOUBLE_EQ(s.headline, 51.9);
  EXPECT_DOUBLE_EQ(s.min, 51.7);
  EXPECT_DOUBLE_EQ(s.max, 56.6);
  EXPECT_NEAR(s.spread_pct, 9.44, 0.01);
  EXPECT_DOUBLE_EQ(SummarizeFigure({4, 1, 3, 2}).headline, 2.5);
  EXPECT_EQ(SummarizeFigure({}).headline, 0);
}

TEST(ServeStats, PerCategoryAndOverall) {
  BenchResults r = ResultsAt({56.6, 51.7, 51.9}, 40);
  // A failed request counts as failed and measures nothing.
  r.runs[1][0].ok = false;
  r.runs[1][0].error = "HTTP status 500";
  const std::vector<CategorySummary> s = Summarize(r);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].category, "overall");
  EXPECT_EQ(s[1].category, "code");
  EXPECT_EQ(s[2].category, "zh");
  EXPECT_EQ(s[0].prompts, 6);
  EXPECT_EQ(s[1].prompts, 3);
  EXPECT_EQ(s[0].failed, 1);
  EXPECT_EQ(s[1].failed, 1);
  EXPECT_EQ(s[2].failed, 0);
  // Each category's prompts run at 0.9, 1.0 and 1.1 times the run's rate: the median is the rate.
  const FigureSummary& zh = s[2].figure(Figure::kDecodeTokS);
  ASSERT_EQ(zh.run_medians.size(), 3u);
  EXPECT_NEAR(zh.run_medians[0], 56.6, 1e-9);
  EXPECT_NEAR(zh.headline, 51.9, 1e-9);
  // Run 2's code prompts lost the 0.9 one: the median of 1.0 and 1.1 times 51.7.
  EXPECT_NEAR(s[1].figure(Figure::kDecodeTokS).run_medians[1], 51.7 * 1.05, 1e-9);
  EXPECT_DOUBLE_EQ(s[0].figure(Figure::kTtftMs).headline, 40);
  EXPECT_DOUBLE_EQ(s[0].figure(Figure::kTokens).headline, 101);
  EXPECT_EQ(s[0].figure(Figure::kTokens).spread_pct, 0);
  EXPECT_NEAR(s[2].figure(Figure::kE2eMs).headline, 40 + 100 / 51.9 * 1000, 1e-6);
}

TEST(ServeStats, TableShowsTheHeadlineAndEveryFigure) {
  const std::string t = FormatResultsTable(ResultsAt({56.6, 51.7, 51.9}));
  EXPECT_NE(t.find("KV pool: 4096 tokens"), std::string::npos) << t;
  EXPECT_NE(t.find("headline: 51.90 decode tok/s (the median of 3 run medians: 56.60, 51.70, 51.90; spread 9.4%)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("code"), std::string::npos) << t;
  for (Figure f : kFigures) EXPECT_NE(t.find(FigureLabel(f)), std::string::npos) << FigureLabel(f);
  EXPECT_NE(t.find("51.70-56.60"), std::string::npos) << t;
}

TEST(ServeStats, JsonRoundTrip) {
  BenchResults r = ResultsAt({30, 31});
  r.runs[0][2].ok = false;
  r.runs[0][2].error = "no end of stream within 5 s";
  const std::string text = FormatBenchResultsJson(r);
  EXPECT_NE(text.find("\"spread_pct\""), std::string::npos);
  absl::StatusOr<BenchResults> back = ParseBenchResults(text, "a.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kv_tokens, 4096);
  EXPECT_EQ(back->started_at, r.started_at);
  ASSERT_EQ(back->runs.size(), 2u);
  EXPECT_EQ(back->runs[0][2].error, r.runs[0][2].error);
  EXPECT_EQ(FormatResultsTable(*back), FormatResultsTable(r));
}

TEST(ServeStats, BadResultsFileNamesTheKey) {
  EXPECT_NE(ParseBenchResults("[]", "a.json").status().message().find("a.json: not a JSON object"),
            std::string::npos);
  EXPECT_NE(ParseBenchResults("{}", "a.json").status().message().find("a.json: runs:"), std::string::npos);
  const absl::Status bad =
      ParseBenchResults(R"({"runs": [{"prompts": [{"category": "c", "ok": true, "ttft_ms": "fast"}]}]})", "a.json")
          .status();
  EXPECT_NE(bad.message().find("a.json: runs[0].prompts[0]:"), std::string::npos) << bad;
}

// Integers are JSON integers within their field's range: a float past int64_t (the bench_files fuzz
// target's input: nlohmann casts it, which is undefined), a fraction, or a count past an int.
TEST(ServeStats, ResultsIntegersAreCheckedIntegers) {
  const auto with = [](const std::string& setup, const std::string& tokens) {
    return "{" + setup + R"("runs": [{"prompts": [{"category": "c", "ok": true, "ttft_ms": 1, "e2e_ms": 2, )" +
           R"("tokens": )" + tokens + "}]}]}";
  };
  ASSERT_TRUE(ParseBenchResults(with(R"("kv_tokens": 4096, "concurrency": 2, )", "8"), "a.json").ok());
  const struct {
    std::string setup, tokens, where;
  } bad[] = {{R"("kv_tokens": 20400000000000000000000000000000000000000008, )", "8",
              "a.json: kv_tokens: expected an integer"},
             {R"("kv_tokens": -1, )", "8", "a.json: kv_tokens: expected an integer in [0, "},
             {R"("concurrency": 2147483648, )", "8", "a.json: concurrency: expected an integer in [1, 2147483647]"},
             {R"("concurrency": 0, )", "8", "a.json: concurrency:"},
             {R"("max_tokens": 1.5, )", "8", "a.json: max_tokens:"},
             {"", "2e43", "a.json: runs[0].prompts[0].tokens: expected an integer"},
             {"", "-8", "a.json: runs[0].prompts[0].tokens:"},
             {"", "\"8\"", "a.json: runs[0].prompts[0].tokens:"}};
  for (const auto& b : bad) {
    const absl::Status st = ParseBenchResults(with(b.setup, b.tokens), "a.json").status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << b.setup << b.tokens;
    EXPECT_NE(st.message().find(b.where), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace tandem::bench
