// `tandemctl bench --compare A.json`: is this run (B) different from A, figure by figure? A
// difference counts only when it is larger than the spread (max - min of the run medians) of
// both sides: a gap that either side's own run-to-run noise covers is "not distinguishable".
#pragma once

#include <string>
#include <vector>

#include "bench/serve_stats.h"

namespace tandem::bench {

enum class CompareVerdict {
  kNotDistinguishable,
  kABetter,    // A faster (or, for tokens, A larger)
  kBBetter,    // B faster (or larger)
  kNoData,     // a side did not measure the figure
};

struct FigureComparison {
  std::string category;
  Figure figure = Figure::kDecodeTokS;
  FigureSummary a, b;
  double difference = 0;      // b.headline - a.headline
  double difference_pct = 0;  // of a.headline (0 when that is 0)
  CompareVerdict verdict = CompareVerdict::kNoData;
};

// Every figure of every category both sides have ("overall" first).
std::vector<FigureComparison> CompareResults(const BenchResults& a, const BenchResults& b);

// One line per figure: "overall decode tok/s: A 51.9 [51.7-56.6] B 60.3 [59.8-61.0] +16.2%: B
// faster (the difference 8.4 exceeds both spreads, A 4.9 and B 1.2)" or "... not distinguishable
// (...)", then a note when a side has fewer than two runs (no spread to judge by).
std::string FormatComparison(const std::vector<FigureComparison>& comparisons, const BenchResults& a,
                             const BenchResults& b);

// [{"category", "figure", "a": {"median", "min", "max", "spread_pct"}, "b": {...}, "difference",
//   "difference_pct", "verdict": "not distinguishable" | "A faster" | "B faster" | ...}]
std::string FormatComparisonJson(const std::vector<FigureComparison>& comparisons);

// The words of a verdict for `figure`: "not distinguishable", "B faster", "A larger", "no data".
std::string VerdictText(CompareVerdict verdict, Figure figure);

}  // namespace tandem::bench
