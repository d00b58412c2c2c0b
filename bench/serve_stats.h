// The figures of `tandemctl bench`: what each prompt of each run measured, and per category and
// overall the median of each run, summarized across runs. The headline of a figure is the
// median of the run medians (never the best run), with the run medians' min-max and their
// spread, (max - min) / headline: three runs of 56.6, 51.7 and 51.9 tok/s report 51.9 with a
// 9.4% spread, where the best run would have claimed 56.6.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::bench {

// One prompt of one run.
struct PromptSample {
  std::string category;
  bool ok = false;
  std::string error;
  double ttft_ms = 0;
  double e2e_ms = 0;
  int64_t tokens = 0;
};

// Tokens after the first over the time after the first (the rate of decode steps alone);
// nullopt for a failed request or one whose tokens all came in one chunk.
std::optional<double> DecodeTokensPerSecond(const PromptSample& s);

enum class Figure { kDecodeTokS, kTtftMs, kE2eMs, kTokens };
inline constexpr std::array<Figure, 4> kFigures = {Figure::kDecodeTokS, Figure::kTtftMs, Figure::kE2eMs,
                                                   Figure::kTokens};
// "decode tok/s", "ttft ms", "e2e ms", "tokens".
const char* FigureLabel(Figure f);
// The JSON key: "decode_tok_s", "ttft_ms", "e2e_ms", "tokens".
const char* FigureKey(Figure f);
// Whether a larger value is better (decode tok/s) or worse (latencies); tokens are neither.
int FigureDirection(Figure f);  // +1 higher is better, -1 lower is better, 0 neither

// One figure of one category across the runs.
struct FigureSummary {
  std::vector<double> run_medians;  // one per run that measured it
  double headline = 0;              // the median of run_medians
  double min = 0, max = 0;
  double spread_pct = 0;            // (max - min) / headline * 100; 0 when headline is 0
};
FigureSummary SummarizeFigure(const std::vector<double>& run_medians);

struct CategorySummary {
  std::string category;  // "overall" for every prompt
  int prompts = 0;       // per run
  int failed = 0;        // failed requests over all runs
  std::array<FigureSummary, kFigures.size()> figures;
  const FigureSummary& figure(Figure f) const { return figures[static_cast<size_t>(f)]; }
};

// What a bench measured and how it was set up. The summaries are recomputed from `runs`.
struct BenchResults {
  std::string url;
  std::string model;
  std::string prompt_set;     // "default" or the JSONL path
  int concurrency = 1;
  int max_tokens = 0;
  int64_t kv_tokens = 0;      // the head's KV pool (0 = unknown)
  std::string started_at;     // UTC, ISO 8601
  std::vector<std::vector<PromptSample>> runs;  // runs[r][p]: prompt p of run r, in prompt-set order
};

// "overall" first, then each category in order of first appearance.
std::vector<CategorySummary> Summarize(const BenchResults& results);

// results.json: the setup, every sample and the summaries. ParseBenchResults reads the setup and
// the samples back (the summaries are recomputed); errors name `file` and the key.
std::string FormatBenchResultsJson(const BenchResults& results);
absl::StatusOr<BenchResults> ParseBenchResults(const std::string& json_text, const std::string& file);
absl::StatusOr<BenchResults> LoadBenchResults(const std::string& path);

// The table: the setup, the headline line, then one row per category and figure
// (median, min-max, spread %).
std::string FormatResultsTable(const BenchResults& results);

}  // namespace tandem::bench
