// Bench results made by hand for the tests of serve_stats, bench_compare and bench_plot: every
// prompt makes 101 tokens, so 100 decode steps at `rate` tok/s take 100 / rate seconds after
// the first token.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/serve_stats.h"

namespace tandem::bench::testing {

inline PromptSample SampleAt(const std::string& category, double rate, double ttft_ms) {
  PromptSample s;
  s.category = category;
  s.ok = true;
  s.tokens = 101;
  s.ttft_ms = ttft_ms;
  s.e2e_ms = ttft_ms + 100.0 / rate * 1000.0;
  return s;
}

// One run: prompt i of `categories` decodes at rate * factors[i % factors.size()].
inline std::vector<PromptSample> RunAt(const std::vector<std::string>& categories, double rate, double ttft_ms,
                                       const std::vector<double>& factors = {0.9, 1.0, 1.1}) {
  std::vector<PromptSample> run;
  for (size_t i = 0; i < categories.size(); ++i) {
    run.push_back(SampleAt(categories[i], rate * factors[i % factors.size()], ttft_ms));
  }
  return run;
}

// Runs whose overall decode medians are `run_rates`, over two categories of three prompts each.
inline BenchResults ResultsAt(const std::vector<double>& run_rates, double ttft_ms = 50) {
  BenchResults r;
  r.url = "http://127.0.0.1:8000";
  r.prompt_set = "default";
  r.max_tokens = 101;
  r.kv_tokens = 4096;
  r.started_at = "2026-12-03T17:00:00Z";
  for (double rate : run_rates) r.runs.push_back(RunAt({"code", "code", "code", "zh", "zh", "zh"}, rate, ttft_ms));
  return r;
}

}  // namespace tandem::bench::testing
