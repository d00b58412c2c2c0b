#include "bench/prompt_bench.h"

#include <ctime>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {
namespace {

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

PromptSample ToPromptSample(const std::string& category, const RequestSample& r) {
  PromptSample s;
  s.category = category;
  s.ok = r.ok;
  s.error = r.error;
  s.ttft_ms = r.ttft_ms;
  s.e2e_ms = r.e2e_ms;
  s.tokens = r.tokens;
  return s;
}

}  // namespace

StreamRequest ChatRequest(const PromptBenchOptions& o, const BenchPrompt& prompt) {
  const nlohmann::json messages = {{{"role", "user"}, {"content", prompt.prompt}}};
  return GreedyStreamRequest(true, messages.dump(), o.max_tokens, o.model);
}

absl::StatusOr<BenchResults> RunPromptBench(const PromptBenchOptions& o, const PromptSet& prompts,
                                            const std::function<void(const std::string&)>& progress) {
  BenchResults results;
  results.url = o.target.url;
  results.model = o.model;
  results.prompt_set = o.prompt_set;
  results.concurrency = o.concurrency;
  results.max_tokens = o.max_tokens;
  results.kv_tokens = o.kv_tokens;
  results.started_at = UtcNow();
  std::vector<StreamRequest> requests;
  for (const BenchPrompt& p : prompts) requests.push_back(ChatRequest(o, p));
  for (int run = 0; run < o.runs; ++run) {
    int finished = 0;
    auto report = [&](size_t i, const RequestSample& r) {
      ++finished;  // RunRequests calls this under its lock
      const PromptSample s = ToPromptSample(prompts[i].category, r);
      std::string what;
      if (!r.ok) {
        what = "FAILED: " + r.error;
      } else {
        const std::optional<double> rate = DecodeTokensPerSecond(s);
        what = absl::StrFormat("%d tokens, ttft %.0f ms, e2e %.0f ms, %s decode tok/s", r.tokens, r.ttft_ms, r.e2e_ms,
                               rate ? absl::StrFormat("%.1f", *rate) : "-");
      }
      progress(absl::StrFormat("run %d/%d: %d/%d done (prompt %d, %s): %s", run + 1, o.runs, finished,
                               prompts.size(), i + 1, prompts[i].category, what));
    };
    ASSIGN_OR_RETURN(std::vector<RequestSample> samples, RunRequests(o.target, o.concurrency, requests, report));
    std::vector<PromptSample> run_samples;
    for (size_t i = 0; i < samples.size(); ++i) run_samples.push_back(ToPromptSample(prompts[i].category, samples[i]));
    results.runs.push_back(std::move(run_samples));
  }
  return results;
}

}  // namespace tandem::bench
