// `tandem-infer bench-serve`: a load generator for an OpenAI-compatible server. At each
// concurrency level it keeps C streaming /v1/completions requests in flight until N have run,
// and reports requests/s, output tokens/s, time to first token and inter-token latency
// percentiles, measured at the client from SSE chunk arrival times.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cli.h"

namespace tandem::bench {

struct BenchServeOptions {
  std::string url = "http://127.0.0.1:8000";  // scheme://host:port (http only)
  std::vector<int> concurrency = {1, 8, 32};
  int requests = 32;            // per concurrency level
  int max_tokens = 32;          // per request (ignore_eos, so every request makes this many)
  int prompt_len = 32;          // random token ids (seeded by request index) in [100, 4000)
  std::string model;            // "" = the server's default
  std::string api_key_file;     // --api-key-file
  std::string api_key;          // read from api_key_file by RunBenchServeCommand
  bool json = false;            // one JSON object per level instead of the table
  int timeout_s = 600;          // per request
};

// One streamed request as the client saw it.
struct RequestSample {
  bool ok = false;
  std::string error;
  double ttft_ms = 0;  // sent -> the first chunk that carries tokens
  double e2e_ms = 0;   // sent -> the end of the stream
  std::vector<double> itl_ms;
  int64_t tokens = 0;  // counted from the chunks' token_ids (the body must ask for return_token_ids)
};

// Where the requests go and the deadline of each (the whole stream, not only one read).
struct ServeTarget {
  std::string url = "http://127.0.0.1:8000";  // http only
  std::string api_key;                        // "" = none
  int timeout_s = 600;
};

// A streaming POST: path "/v1/completions" or "/v1/chat/completions", a JSON body with
// "stream": true and "return_token_ids": true.
struct StreamRequest {
  std::string path;
  std::string body;
};

// The request both benchmarks send: greedy, streamed with token ids, ignore_eos so that it
// decodes exactly `max_tokens`. `input_json` is the JSON of "messages" (chat) or "prompt"
// (completions); `model` "" = the server's default.
StreamRequest GreedyStreamRequest(bool chat, const std::string& input_json, int max_tokens, const std::string& model);

// Runs `requests` with `concurrency` of them in flight (one keep-alive connection per worker).
// samples[i] belongs to requests[i]; `done` (when given) hears each as it ends, one at a time.
absl::StatusOr<std::vector<RequestSample>> RunRequests(
    const ServeTarget& target, int concurrency, const std::vector<StreamRequest>& requests,
    const std::function<void(size_t index, const RequestSample&)>& done = nullptr);

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

struct BenchLevelResult {
  int concurrency = 0;
  int ok = 0, failed = 0;
  std::string first_error;
  double seconds = 0;
  int64_t output_tokens = 0;
  double requests_per_second = 0, output_tokens_per_second = 0;
  Percentiles ttft_ms, itl_ms;
};

// Linear interpolation between closest ranks; `values` need not be sorted.
Percentiles ComputePercentiles(std::vector<double> values);

// The `bench-serve` subcommand's flags, into `options`.
void AddBenchServeFlags(CLI::App* command, BenchServeOptions* options);
absl::StatusOr<BenchLevelResult> RunBenchLevel(const BenchServeOptions& options, int concurrency);
std::string FormatBenchTable(const std::vector<BenchLevelResult>& results);
std::string FormatBenchJson(const BenchLevelResult& result);

// `tandem-infer bench-serve` after parsing: exit code, errors on stderr.
int RunBenchServeCommand(BenchServeOptions options);

}  // namespace tandem::bench
