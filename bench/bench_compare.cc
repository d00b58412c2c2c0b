#include "bench/bench_compare.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {
namespace {

CompareVerdict Judge(Figure f, const FigureSummary& a, const FigureSummary& b) {
  if (a.run_medians.empty() || b.run_medians.empty()) return CompareVerdict::kNoData;
  const double difference = b.headline - a.headline;
  // Strictly larger than both ranges: equal headlines (two runs with zero spread) stay
  // indistinguishable.
  if (std::fabs(difference) <= std::max(a.max - a.min, b.max - b.min)) return CompareVerdict::kNotDistinguishable;
  // For latencies the smaller is better; for tokens "better" reads "larger".
  const bool b_larger = difference > 0;
  const bool b_better = FigureDirection(f) < 0 ? !b_larger : b_larger;
  return b_better ? CompareVerdict::kBBetter : CompareVerdict::kABetter;
}

}  // namespace

std::vector<FigureComparison> CompareResults(const BenchResults& a, const BenchResults& b) {
  const std::vector<CategorySummary> sa = Summarize(a);
  const std::vector<CategorySummary> sb = Summarize(b);
  std::vector<FigureComparison> out;
  for (const CategorySummary& ca : sa) {
    auto cb = std::find_if(sb.begin(), sb.end(), [&](const CategorySummary& c) { return c.category == ca.category; });
    if (cb == sb.end()) continue;
    for (Figure f : kFigures) {
      FigureComparison c;
      c.category = ca.category;
      c.figure = f;
      c.a = ca.figure(f);
      c.b = cb->figure(f);
      c.difference = c.b.headline - c.a.headline;
      c.difference_pct = c.a.headline != 0 ? c.difference / c.a.headline * 100 : 0;
      c.verdict = Judge(f, c.a, c.b);
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::string VerdictText(CompareVerdict verdict, Figure figure) {
  const char* better = FigureDirection(figure) == 0 ? "larger" : "faster";
  switch (verdict) {
    case CompareVerdict::kNotDistinguishable: return "not distinguishable";
    case CompareVerdict::kABetter: return absl::StrCat("A ", better);
    case CompareVerdict::kBBetter: return absl::StrCat("B ", better);
    case CompareVerdict::kNoData: return "no data";
  }
  return "?";
}

std::string FormatComparison(const std::vector<FigureComparison>& comparisons, const BenchResults& a,
                             const BenchResults& b) {
  std::string out = absl::StrFormat("A: %s (%s, %d runs)\nB: this run (%s, %d runs)\n", a.started_at, a.url,
                                    a.runs.size(), b.url, b.runs.size());
  for (const FigureComparison& c : comparisons) {
    const double ra = c.a.max - c.a.min, rb = c.b.max - c.b.min;
    std::string why;
    if (c.verdict == CompareVerdict::kNoData) {
      why = "a side did not measure it";
    } else if (c.verdict == CompareVerdict::kNotDistinguishable) {
      why = absl::StrFormat("the difference %.4g is within the spread of %s", std::fabs(c.difference),
                            std::fabs(c.difference) <= ra && std::fabs(c.difference) <= rb ? "both sides"
                            : std::fabs(c.difference) <= ra                                  ? "A"
                                                                                             : "B");
    } else {
      why = absl::StrFormat("the difference %.4g exceeds both spreads, A %.4g and B %.4g", std::fabs(c.difference), ra,
                            rb);
    }
    out += absl::StrFormat("%s %s: A %.4g [%.4g-%.4g] B %.4g [%.4g-%.4g] %+.1f%%: %s (%s)\n", c.category,
                           FigureLabel(c.figure), c.a.headline, c.a.min, c.a.max, c.b.headline, c.b.min, c.b.max,
                           c.difference_pct, VerdictText(c.verdict, c.figure), why);
  }
  if (a.runs.size() < 2 || b.runs.size() < 2) {
    out += "note: a side has a single run, so its spread is 0 and any difference counts; use --runs 3\n";
  }
  if (a.max_tokens != b.max_tokens || a.prompt_set != b.prompt_set || a.concurrency != b.concurrency) {
    out += absl::StrFormat("note: the setups differ (A: %s, max_tokens %d, concurrency %d; B: %s, max_tokens %d, "
                           "concurrency %d)\n",
                           a.prompt_set, a.max_tokens, a.concurrency, b.prompt_set, b.max_tokens, b.concurrency);
  }
  return out;
}

std::string FormatComparisonJson(const std::vector<FigureComparison>& comparisons) {
  nlohmann::json out = nlohmann::json::array();
  auto side = [](const FigureSummary& s) {
    return nlohmann::json{{"median", s.headline}, {"min", s.min}, {"max", s.max}, {"spread_pct", s.spread_pct}};
  };
  for (const FigureComparison& c : comparisons) {
    out.push_back({{"category", c.category},
                   {"figure", FigureKey(c.figure)},
                   {"a", side(c.a)},
                   {"b", side(c.b)},
                   {"difference", c.difference},
                   {"difference_pct", c.difference_pct},
                   {"verdict", VerdictText(c.verdict, c.figure)}});
  }
  return out.dump(2);
}

}  // namespace tandem::bench
