#include "controller/bench_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "bench/bench_compare.h"
#include "bench/bench_plot.h"
#include "bench/prompt_bench.h"
#include "bench/prompt_set.h"
#include "common/status.h"
#include "controller/cluster_ops.h"
#include "controller/preflight_command.h"
#include "proto/rank_state.h"

namespace tandem::controller {
namespace {

constexpr char kFooter[] =
    "The headline of every figure is the median of the run medians, with their min-max and spread\n"
    "((max - min) / median); --compare calls a difference inside either side's spread \"not distinguishable\".\n"
    "Progress goes to stderr. --json: the results object of results.json on stdout, with \"compare\" when\n"
    "--compare is given. Exit status: 0 done, 1 the head is not serving or a request failed (results are\n"
    "still written), 2 bad usage, cluster, prompt or results file. Details: docs/bench-command.md.";

absl::Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError("cannot write " + path.string());
  return absl::OkStatus();
}

void Progress(const std::string& line) { std::fprintf(stderr, "tandemctl bench: %s\n", line.c_str()); }

// The message on stderr and, with --json, {"ok": false, "error"} on stdout (as ReportBadConfig).
int Fail(const BenchCommandOptions& o, int code, const std::string& message) {
  std::fprintf(stderr, "tandemctl bench: %s\n", message.c_str());
  if (o.json) std::printf("%s\n", nlohmann::json{{"ok", false}, {"error", message}}.dump().c_str());
  return code;
}

}  // namespace

void AddBenchFlags(CLI::App* command, BenchCommandOptions* o) {
  command->footer(kFooter);
  command->add_option("-f,--file", o->cluster_file, "cluster file")->type_name("PATH");
  command->add_option("--prompts", o->prompts_file,
                      "a JSONL prompt set, one {\"category\": ..., \"prompt\": ...} per line [the built-in code, "
                      "english and chinese prompts]")
      ->type_name("PATH");
  command->add_option("--runs", o->runs, "how many times the whole prompt set is sent")->check(CLI::Range(1, 100));
  command->add_option("--concurrency", o->concurrency, "requests in flight")->check(CLI::Range(1, 1024));
  command->add_option("--max-tokens", o->max_tokens, "tokens each answer decodes (ignore_eos)")
      ->check(CLI::Range(2, 1 << 20));
  command->add_option("--timeout-s", o->timeout_s, "deadline of each request (connect, first token, whole stream)")
      ->check(CLI::Range(1, 86400));
  cli::AddJson(command, &o->json);
  command->add_option("--out", o->out_dir, "write results.json, table.txt, decode_tok_s.svg (and compare.txt) here")
      ->type_name("DIR");
  command->add_option("--compare", o->compare_file, "an earlier bench's results.json (A) to compare this run (B) with")
      ->type_name("results-A.json");
}

std::string HeadApiUrl(const std::string& api_endpoint, const std::string& agent_address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(api_endpoint, &host, &port)) return "";
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    int agent_port = 0;
    if (!SplitHostPort(agent_address, &host, &agent_port)) return "";
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port);
}

absl::Status WriteBenchFolder(const std::string& dir, const bench::BenchResults& results,
                              const std::string& comparison) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError("cannot create " + dir + ": " + ec.message());
  const std::filesystem::path d(dir);
  RETURN_IF_ERROR(WriteFile(d / "results.json", bench::FormatBenchResultsJson(results) + "\n"));
  RETURN_IF_ERROR(WriteFile(d / "table.txt", bench::FormatResultsTable(results)));
  RETURN_IF_ERROR(WriteFile(d / "decode_tok_s.svg", bench::PlotDecodeRatesSvg(results)));
  if (!comparison.empty()) RETURN_IF_ERROR(WriteFile(d / "compare.txt", comparison));
  return absl::OkStatus();
}

int RunBenchCommand(const BenchCommandOptions& o) {
  // Every file is read before the cluster is asked anything: a typo costs no bench time.
  absl::StatusOr<bench::PromptSet> prompts =
      o.prompts_file.empty() ? absl::StatusOr<bench::PromptSet>(bench::DefaultPromptSet())
                             : bench::LoadPromptSetJsonl(o.prompts_file);
  if (!prompts.ok()) return ReportBadConfig(prompts.status(), o.json);
  std::optional<bench::BenchResults> baseline;
  if (!o.compare_file.empty()) {
    absl::StatusOr<bench::BenchResults> a = bench::LoadBenchResults(o.compare_file);
    if (!a.ok()) return ReportBadConfig(a.status(), o.json);
    baseline = *std::move(a);
  }
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(o.cluster_file, "");
  if (!ctx.ok()) return ReportBadConfig(ctx.status(), o.json);

  // The head's status names where its API listens and how large its KV pool is.
  std::vector<v1::RankStatus> raw;
  const ObservedState observed = ObserveCluster(*ctx, ctx->spec.timeouts.status, &raw);
  const ObservedRank& head = observed.nodes[0];
  if (!head.reachable) return Fail(o, kExitChecksFailed, "head " + head.name + " unreachable: " + head.error);
  if (head.state != v1::RANK_STATE_SERVING || raw[0].api_endpoint().empty()) {
    return Fail(o, kExitChecksFailed, "head " + head.name + " is not serving (state " +
                                       RankStateName(head.state, "unknown") + "): run `tandemctl up -f " +
                                       o.cluster_file + "` first");
  }
  bench::PromptBenchOptions run;
  run.target.url = HeadApiUrl(raw[0].api_endpoint(), ctx->spec.nodes[0].agent);
  run.target.api_key = ctx->api_key;
  run.target.timeout_s = o.timeout_s;
  run.model = ctx->spec.model_served_name;
  run.prompt_set = o.prompts_file.empty() ? "default" : o.prompts_file;
  run.runs = o.runs;
  run.concurrency = o.concurrency;
  run.max_tokens = o.max_tokens;
  run.kv_tokens = raw[0].kv_tokens();
  Progress(absl::StrFormat("%s: %d prompts x %d runs, concurrency %d, max_tokens %d, KV pool %d tokens",
                           run.target.url, prompts->size(), o.runs, o.concurrency, o.max_tokens, run.kv_tokens));
  absl::StatusOr<bench::BenchResults> results = bench::RunPromptBench(run, *prompts, Progress);
  if (!results.ok()) return Fail(o, kExitChecksFailed, StatusText(results.status()));

  std::string comparison;
  std::vector<bench::FigureComparison> compared;
  if (baseline) {
    compared = bench::CompareResults(*baseline, *results);
    comparison = bench::FormatComparison(compared, *baseline, *results);
  }
  // The folder first, so that its progress line comes before the results on stdout; the
  // results are printed even when it cannot be written.
  absl::Status written = absl::OkStatus();
  if (!o.out_dir.empty()) {
    written = WriteBenchFolder(o.out_dir, *results, comparison);
    Progress(written.ok() ? "wrote " + o.out_dir + "/results.json, table.txt, decode_tok_s.svg" +
                                (comparison.empty() ? "" : ", compare.txt")
                          : StatusText(written));
  }
  if (o.json) {
    nlohmann::json j = nlohmann::json::parse(bench::FormatBenchResultsJson(*results));
    if (baseline) j["compare"] = nlohmann::json::parse(bench::FormatComparisonJson(compared));
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::fputs(bench::FormatResultsTable(*results).c_str(), stdout);
    if (baseline) std::printf("\ncompared with %s:\n%s", o.compare_file.c_str(), comparison.c_str());
  }
  std::fflush(stdout);
  // stdout already holds the results: what went wrong is said on stderr only.
  if (!written.ok()) return kExitChecksFailed;
  const int failed = bench::Summarize(*results)[0].failed;
  if (failed > 0) {
    Progress(absl::StrFormat("%d request(s) failed (see the FAILED progress lines)", failed));
    return kExitChecksFailed;
  }
  return kExitOk;
}

}  // namespace tandem::controller
