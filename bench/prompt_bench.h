// The runs of `tandemctl bench`: the prompt set sent `runs` times through an OpenAI chat
// endpoint (streamed, greedy, ignore_eos so every answer decodes max_tokens), with the
// concurrency asked for, over bench_serve's load generator (RunRequests).
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "bench/bench_serve.h"
#include "bench/prompt_set.h"
#include "bench/serve_stats.h"

namespace tandem::bench {

struct PromptBenchOptions {
  ServeTarget target;          // url, API key, the deadline of each request
  std::string model;           // "" = the server's default
  std::string prompt_set = "default";  // recorded in the results
  int runs = 3;
  int concurrency = 1;
  int max_tokens = 128;
  int64_t kv_tokens = 0;       // recorded in the results
};

// The chat request for one prompt.
StreamRequest ChatRequest(const PromptBenchOptions& options, const BenchPrompt& prompt);

// Every run, one progress line per request on `progress` ("run 2/3 prompt 5/18 code: 128 tokens,
// ttft 35 ms, 51.2 decode tok/s"). Failed requests are recorded in the results, not errors;
// the error is for a URL that cannot be used at all.
absl::StatusOr<BenchResults> RunPromptBench(const PromptBenchOptions& options, const PromptSet& prompts,
                                            const std::function<void(const std::string&)>& progress);

}  // namespace tandem::bench
