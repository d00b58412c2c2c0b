// `tandemctl bench -f cluster.yaml`: the prompt set through the head's OpenAI API, `--runs`
// times, reported as medians with their spread (bench/serve_stats.h); `--compare A.json` says
// for each figure whether this run differs from A by more than either side's spread. Exit 0
// done, 1 the head is not serving or a request failed (the results are still written), 2 usage,
// a bad cluster, prompt or results file.
//
// Its flags are defined here (as certs' are): the command's defaults are part of what it means,
// and a test can parse a command line as an operator would.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "bench/serve_stats.h"
#include "common/cli.h"

namespace tandem::controller {

struct BenchCommandOptions {
  std::string cluster_file = "cluster.yaml";
  std::string prompts_file;  // JSONL; "" = the built-in set
  int runs = 3;
  int concurrency = 1;
  int max_tokens = 128;
  int timeout_s = 600;       // deadline of each request, and of nothing else that waits long
  bool json = false;
  std::string out_dir;       // results.json, table.txt, decode_tok_s.svg (and compare.txt)
  std::string compare_file;  // a results.json of an earlier bench
};

void AddBenchFlags(CLI::App* command, BenchCommandOptions* options);

int RunBenchCommand(const BenchCommandOptions& options);

// "http://HOST:PORT" of the head's API from the endpoint its status reports; a wildcard listen
// address (0.0.0.0, ::, empty) is reached at the host of the head's agent address.
std::string HeadApiUrl(const std::string& api_endpoint, const std::string& agent_address);

// The results folder: results.json, table.txt, decode_tok_s.svg, and compare.txt when
// `comparison` is not empty. Creates `dir` (and its parents).
absl::Status WriteBenchFolder(const std::string& dir, const bench::BenchResults& results,
                              const std::string& comparison);

}  // namespace tandem::controller
