// tandemctl: subcommands and their flags only (common/cli.h); everything else lives in
// tandem_controller.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/crash_report.h"
#include "common/version.h"
#include "controller/bench_command.h"
#include "controller/certs_command.h"
#include "controller/down_command.h"
#include "controller/linktest_command.h"
#include "controller/preflight_command.h"
#include "controller/probe_command.h"
#include "controller/serve_command.h"
#include "controller/status_command.h"
#include "controller/up_command.h"

namespace {

using tandem::cli::AddCommand;

constexpr char kDescription[] =
    "tandemctl: the tandem controller. Reads cluster.yaml and talks to every node's tandem-agentd.";

constexpr char kFooter[] =
    "Run `tandemctl <command> --help` for a command's flags. The cluster.yaml schema is in\n"
    "docs/cluster-yaml.md; the preflight checks and their fixes in docs/preflight.md; up, down,\n"
    "status, probe and serve in docs/orchestration.md.\n"
    "Exit status of every command: 0 done (serving, passed), 1 a check or a node failed,\n"
    "2 bad usage or cluster file (the message names the flag, or file, line and key).";

constexpr char kStateDirHelp[] =
    "where the controller keeps probe references and serve's restart budget "
    "(default ~/.local/state/tandem, /var/lib/tandem-ctl as root)";

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// The flags every cluster command shares: -f/--file, --state-dir (where the command keeps state;
// null: it keeps none) and --json (null: it does not report).
void AddClusterFlags(CLI::App* command, std::string* file, std::string* state_dir, bool* json) {
  command->add_option("-f,--file", *file, "cluster file")->type_name("PATH");
  if (state_dir != nullptr) command->add_option("--state-dir", *state_dir, kStateDirHelp)->type_name("DIR");
  if (json != nullptr) tandem::cli::AddJson(command, json);
}

}  // namespace

int main(int argc, char** argv) {
  tandem::InstallCrashReport(argv[0]);
  using namespace tandem::controller;
  namespace cli = tandem::cli;
  auto app = cli::NewApp("tandemctl", kDescription, [] { return std::string("tandemctl ") + tandem::Version(); });
  app->require_subcommand(1);
  app->footer(kFooter);

  PreflightCommandOptions preflight;
  bool preflight_skip_weights = false;
  CLI::App* preflight_cmd = AddCommand(
      app.get(), "preflight",
      "check every node against the others before anything starts\nContacts every agent in parallel, gathers its "
      "facts and the sha256 manifest of its model folder, and prints one row per check and node (CHECK NODE STATUS "
      "FOUND EXPECTED FIX) and the NCCL environment derived for each node");
  AddClusterFlags(preflight_cmd, &preflight.cluster_file, nullptr, &preflight.json);
  preflight_cmd->add_flag("--skip-weights", preflight_skip_weights,
                          "do not hash the model folders (weights parity becomes a warning)");
  preflight_cmd->add_flag("--rehash", preflight.rehash,
                          "the agents read every byte instead of trusting their digest cache (the default with "
                          "`preflight: {verify: full}` in cluster.yaml)");
  cli::AddSeconds(preflight_cmd, "--facts-timeout", &preflight.facts_timeout, "deadline for each agent's facts");
  cli::AddSeconds(preflight_cmd, "--hash-timeout", &preflight.hash_timeout,
                  "deadline for hashing one node's model folder");
  preflight_cmd->footer("exit status: 0 every check passed (warnings allowed), 1 a check failed, 2 bad cluster file "
                        "or usage.\n--json: {\"ok\", \"checks\": [...], \"nccl_env\": {...}}.");

  UpCommandOptions up;
  bool up_skip_weights = false;
  CLI::App* up_cmd = AddCommand(
      app.get(), "up",
      "preflight, plan, load, join (workers first), probe, serve\n"
      "preflight -> plan -> load (parallel) -> join (workers first, head last) -> probe through the head -> "
      "serving; prints each phase's duration and the API URL. Any failure: every agent leaves the group, exit 1");
  AddClusterFlags(up_cmd, &up.cluster_file, &up.state_dir, &up.json);
  up_cmd->add_flag("--skip-weights", up_skip_weights, "do not hash the model folders in the preflight");
  up_cmd->add_flag("--rehash", up.rehash, "the weights check reads every byte (preflight.verify: full does it always)");
  up_cmd->footer("--json: the phase lines go to stderr; stdout gets {\"ok\", \"already_serving\", \"generation\", "
                 "\"transport\", \"api_endpoint\", \"phases\": [{\"phase\", \"seconds\"}], \"total_seconds\", "
                 "\"failed_phase\", \"error\", \"preflight\"}.");

  DownCommandOptions down;
  CLI::App* down_cmd = AddCommand(app.get(), "down",
                                  "stop serving and unload on every node\nSetServing(false) + LeaveGroup on every "
                                  "agent; exit 1 names the agents that could not be stopped");
  AddClusterFlags(down_cmd, &down.cluster_file, nullptr, &down.json);
  down_cmd->footer("--json: {\"ok\", \"seconds\", \"nodes\": [{\"name\", \"agent\", \"down\", \"error\"}]}.");

  StatusCommandOptions status;
  CLI::App* status_cmd = AddCommand(
      app.get(), "status",
      "show every node's state and the cluster's (exit 0 only when serving)\n"
      "Every node's state, rank, generation, KV tokens, iterations, queue depth and last probe, and the cluster's "
      "state (serving|degraded|starting|down|failed); exit 0 only when serving");
  AddClusterFlags(status_cmd, &status.cluster_file, &status.state_dir, &status.json);

  ProbeCommandOptions probe;
  CLI::App* probe_cmd = AddCommand(
      app.get(), "probe",
      "run one inference probe through the head\nChecks the probe.expect substring, or the generation's recorded "
      "greedy ids");
  AddClusterFlags(probe_cmd, &probe.cluster_file, &probe.state_dir, &probe.json);
  probe_cmd->footer("--json: {\"ok\", \"head\", \"generation\", \"latency_s\", \"detail\", \"error\"}.");

  ServeCommandOptions serve;
  bool serve_skip_weights = false;
  CLI::App* serve_cmd = AddCommand(
      app.get(), "serve",
      "keep the cluster serving (reconciler, restart budget, /metrics)\n"
      "observe -> reconcile -> act every --interval; restarts a broken group whole with "
      "backoff within serve.restart_budget, then reports failed: operator needed. It waits, without spending the "
      "budget, while an agent is unreachable or the preflight fails. SIGTERM stops it and leaves the cluster as it is");
  AddClusterFlags(serve_cmd, &serve.cluster_file, &serve.state_dir, nullptr);
  serve_cmd->add_option("--metrics-listen", serve.metrics_listen, "/metrics address (overrides serve.metrics_listen)")
      ->type_name("HOST:PORT");
  cli::AddSeconds(serve_cmd, "--interval", &serve.loop_interval, "time between two reconcile passes");
  serve_cmd->add_flag("--skip-weights", serve_skip_weights, "the preflight of each restart does not hash the weights");

  CertsCommandOptions certs;
  CLI::App* certs_cmd = AddCommand(app.get(), "certs", "");
  AddCertsFlags(certs_cmd, &certs);

  BenchCommandOptions bench;
  CLI::App* bench_cmd = AddCommand(
      app.get(), "bench",
      "load-test the serving cluster\n"
      "The speed of the serving cluster: a prompt set (code, English, Chinese or --prompts JSONL) through the head's "
      "API --runs times; per category decode tok/s, TTFT, e2e and tokens as the median of run medians with min-max "
      "and spread; --compare an earlier results.json");
  AddBenchFlags(bench_cmd, &bench);

  LinktestCommandOptions linktest;
  CLI::App* linktest_cmd = AddCommand(
      app.get(), "linktest",
      "measure the fabric between the nodes\n"
      "A timed TCP transfer between every ordered pair of nodes over all their shared interfaces at once, with both "
      "ends' interface counters: Gb/s and a verdict with its evidence per interface");
  AddLinktestFlags(linktest_cmd, &linktest);

  CLI::App* version_cmd = AddCommand(app.get(), "version", "print the build id (as --version)");

  if (std::optional<int> rc = cli::Parse(*app, std::vector<std::string>(argv + 1, argv + argc))) return *rc;

  if (preflight_cmd->parsed()) {
    preflight.hash_weights = !preflight_skip_weights;
    return RunPreflight(preflight);
  }
  if (up_cmd->parsed()) {
    up.hash_weights = !up_skip_weights;
    return RunUp(up);
  }
  if (down_cmd->parsed()) return RunDown(down);
  if (status_cmd->parsed()) return RunStatus(status);
  if (probe_cmd->parsed()) return RunProbeCommand(probe);
  if (certs_cmd->parsed()) return RunCerts(certs);
  if (version_cmd->parsed()) {
    std::printf("tandemctl %s\n", tandem::Version());
    return 0;
  }
  if (bench_cmd->parsed()) return RunBenchCommand(bench);
  if (linktest_cmd->parsed()) return RunLinktest(linktest);
  serve.hash_weights = !serve_skip_weights;
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  return RunServe(serve, &g_stop);
}
