#include "bench/bench_plot.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/bench/synthetic_results.h"

namespace tandem::bench {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(BenchPlot, OneLinePerRunOnePointPerPrompt) {
  const BenchResults r = testing::ResultsAt({50, 60, 55});
  const std::string svg = PlotDecodeRatesSvg(r);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << svg.substr(0, 80);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(Count(svg, "<path d=\"M"), 3u);
  EXPECT_EQ(Count(svg, "<circle "), 18u);
  for (const char* label : {">run 1<", ">run 2<", ">run 3<", ">code<", ">zh<", ">6<"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  // The fastest prompt (60 * 1.1 = 66 tok/s) sets the axis: about five steps (20) up to 80.
  for (const char* tick : {">0</text>", ">20</text>", ">80</text>"}) EXPECT_NE(svg.find(tick), std::string::npos);
  EXPECT_EQ(svg.find(">100</text>"), std::string::npos);
}

TEST(BenchPlot, FailedPromptBreaksTheLineAndTextIsEscaped) {
  BenchResults r = testing::ResultsAt({50});
  r.runs[0][2].ok = false;
  for (PromptSample& s : r.runs[0]) s.category = s.category == "zh" ? "<zh & co>" : s.category;
  r.model = "m\"1\"";
  const std::string svg = PlotDecodeRatesSvg(r);
  EXPECT_EQ(Count(svg, "<circle "), 5u);
  // Two segments: prompts 1-2, then 4-6.
  const size_t path = svg.find("<path d=\"");
  ASSERT_NE(path, std::string::npos);
  const std::string d = svg.substr(path, svg.find('"', path + 9) - path);
  EXPECT_EQ(Count(d, "M"), 2u) << d;
  EXPECT_EQ(Count(d, "L"), 3u) << d;
  EXPECT_NE(svg.find("&lt;zh &amp; co&gt;"), std::string::npos);
  EXPECT_NE(svg.find("m&quot;1&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<zh"), std::string::npos);
}

}  // namespace
}  // namespace tandem::bench
