// Fuzz target: the files `tandemctl bench` reads (untrusted: written by people or other runs):
// a JSONL prompt set, and a results.json given to --compare, which then goes through the
// summaries, the table, the plot and the comparison.
#include <cstdint>
#include <string>

#include "bench/bench_compare.h"
#include "bench/bench_plot.h"
#include "bench/prompt_set.h"
#include "bench/serve_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto prompts = tandem::bench::ParsePromptSetJsonl(text, "fuzz/prompts.jsonl");
  if (prompts.ok()) {
    // Accepted sets have something to send under a name.
    if (prompts->empty()) __builtin_trap();
    for (const auto& p : *prompts) {
      if (p.category.empty() || p.prompt.empty()) __builtin_trap();
    }
  }
  auto results = tandem::bench::ParseBenchResults(text, "fuzz/results.json");
  if (results.ok()) {
    const auto summary = tandem::bench::Summarize(*results);
    if (summary.empty() || summary[0].category != "overall") __builtin_trap();
    (void)tandem::bench::FormatResultsTable(*results);
    (void)tandem::bench::PlotDecodeRatesSvg(*results);
    const auto compared = tandem::bench::CompareResults(*results, *results);
    // A bench compared with itself can never differ.
    for (const auto& c : compared) {
      if (c.verdict != tandem::bench::CompareVerdict::kNotDistinguishable &&
          c.verdict != tandem::bench::CompareVerdict::kNoData) {
        __builtin_trap();
      }
    }
    (void)tandem::bench::FormatComparison(compared, *results, *results);
  }
  return 0;
}
