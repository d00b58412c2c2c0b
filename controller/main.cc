// tandemctl: subcommand dispatch and flags only; everything else lives in tandem_controller.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/version.h"
#include "controller/certs_command.h"
#include "controller/down_command.h"
#include "controller/preflight_command.h"
#include "controller/probe_command.h"
#include "controller/serve_command.h"
#include "controller/status_command.h"
#include "controller/up_command.h"

#include <atomic>
#include <csignal>

namespace {

constexpr char kUsage[] =
    "tandemctl: the tandem controller. Reads cluster.yaml and talks to every node's tandem-agentd.\n"
    "\n"
    "usage: tandemctl <command> [flags]\n"
    "\n"
    "commands:\n"
    "  preflight   check every node against the others before anything starts (driver, kernel,\n"
    "              agent build, weights, RoCE GID index, NICs, memory, model folder)\n"
    "  up          preflight, plan, load, join (workers first), probe, serve\n"
    "  down        stop serving and unload on every node\n"
    "  status      show every node's state and the cluster's (exit 0 only when serving)\n"
    "  probe       run one inference probe through the head\n"
    "  serve       keep the cluster serving (reconciler, restart budget, /metrics)\n"
    "  certs       make a cluster CA and per-node certificates for mutual TLS\n"
    "  bench       load-test the serving cluster              (not implemented yet: no issue yet)\n"
    "  linktest    measure the fabric between the nodes       (not implemented yet: no issue yet)\n"
    "  version     print the version\n"
    "\n"
    "Run `tandemctl <command> --help` for a command's flags. The cluster.yaml schema is in\n"
    "docs/cluster-yaml.md; the preflight checks and their fixes in docs/preflight.md.\n";

constexpr char kPreflightUsage[] =
    "usage: tandemctl preflight [-f cluster.yaml] [--json] [--skip-weights] [--rehash]\n"
    "                           [--facts-timeout SECONDS] [--hash-timeout SECONDS]\n"
    "\n"
    "Contacts every agent named in cluster.yaml in parallel, gathers its facts and the sha256\n"
    "manifest of its model folder, and compares the nodes. Prints one row per check and node:\n"
    "CHECK NODE STATUS FOUND EXPECTED FIX, and the NCCL environment derived for each node\n"
    "(with --json: {\"ok\", \"checks\": [...], \"nccl_env\": {...}}).\n"
    "\n"
    "flags:\n"
    "  -f, --file PATH          cluster file (default: cluster.yaml)\n"
    "  --json                   machine-readable output on stdout\n"
    "  --skip-weights           do not hash the model folders (weights parity becomes a warning)\n"
    "  --rehash                 the agents read every byte instead of trusting their digest cache\n"
    "                           (also the default with `preflight: {verify: full}` in cluster.yaml)\n"
    "  --facts-timeout SECONDS  deadline for each agent's facts (default 5)\n"
    "  --hash-timeout SECONDS   deadline for hashing one node's model folder (default 1800)\n"
    "\n"
    "exit status: 0 every check passed (warnings allowed), 1 a check failed,\n"
    "             2 bad cluster file or usage (the message names file, line and key).\n";

int UsageError(const std::string& msg, const char* usage) {
  std::fprintf(stderr, "tandemctl: %s\n\n%s", msg.c_str(), usage);
  return 2;
}

bool ParseSeconds(const char* text, std::chrono::milliseconds* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0) || v > 86400) return false;
  *out = std::chrono::milliseconds(static_cast<int64_t>(v * 1000));
  return true;
}

int Preflight(const std::vector<std::string>& args) {
  tandem::controller::PreflightCommandOptions opts;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= args.size()) return nullptr;
      return args[++i].c_str();
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kPreflightUsage, stdout);
      return 0;
    } else if (a == "-f" || a == "--file") {
      const char* v = value("--file");
      if (!v) return UsageError(a + " needs a path", kPreflightUsage);
      opts.cluster_file = v;
    } else if (a.rfind("--file=", 0) == 0) {
      opts.cluster_file = a.substr(7);
    } else if (a == "--json") {
      opts.json = true;
    } else if (a == "--skip-weights") {
      opts.hash_weights = false;
    } else if (a == "--rehash") {
      opts.rehash = true;
    } else if (a == "--facts-timeout" || a == "--hash-timeout") {
      const char* v = value(a.c_str());
      auto* target = a == "--facts-timeout" ? &opts.facts_timeout : &opts.hash_timeout;
      if (!v || !ParseSeconds(v, target)) return UsageError(a + " needs a number of seconds", kPreflightUsage);
    } else {
      return UsageError("unknown flag for preflight: " + a, kPreflightUsage);
    }
  }
  return tandem::controller::RunPreflight(opts);
}

constexpr char kOrchestrationUsage[] =
    "usage: tandemctl up     -f cluster.yaml [--state-dir DIR] [--skip-weights] [--rehash]\n"
    "       tandemctl down   -f cluster.yaml\n"
    "       tandemctl status -f cluster.yaml [--json] [--state-dir DIR]\n"
    "       tandemctl probe  -f cluster.yaml [--state-dir DIR]\n"
    "       tandemctl serve  -f cluster.yaml [--state-dir DIR] [--metrics-listen HOST:PORT]\n"
    "                        [--interval SECONDS] [--skip-weights]\n"
    "\n"
    "up: config -> preflight -> plan -> load (parallel) -> join (workers first, head last) ->\n"
    "    probe through the head -> serving; prints each phase's duration and the API URL.\n"
    "    Any failure: every agent leaves the group; exit 1. Exit 0 only when serving.\n"
    "    --rehash: the weights check reads every byte (preflight.verify: full does it always).\n"
    "down: SetServing(false) + LeaveGroup(unload) everywhere; exit 1 names unreachable agents.\n"
    "status: per node state, rank, generation, KV tokens, iterations, queue depth, last probe;\n"
    "    cluster state serving|degraded|starting|down|failed. Exit 0 only when serving.\n"
    "probe: one probe now (probe.expect substring, or the generation's recorded greedy ids).\n"
    "serve: observe -> reconcile -> act every --interval (default 1 s); restarts a broken group\n"
    "    whole with backoff within serve.restart_budget, then reports failed: operator needed.\n"
    "    It waits, without spending the budget, while an agent is unreachable or the preflight\n"
    "    fails; the budget lives in the state file; operator needed clears once the group serves.\n"
    "    SIGTERM stops it and leaves the cluster as it is.\n"
    "\n"
    "--state-dir: where the controller keeps probe references and serve's restart budget\n"
    "    (default ~/.local/state/tandem, /var/lib/tandem-ctl as root). Details: docs/orchestration.md.\n";

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// Flags shared by the orchestration commands; `allowed` lists the ones this command takes.
struct OrchestrationFlags {
  std::string file = "cluster.yaml";
  std::string state_dir;
  std::string metrics_listen;
  bool json = false;
  bool skip_weights = false;
  bool rehash = false;
  std::chrono::milliseconds interval{1000};
};

int ParseOrchestrationFlags(const std::string& cmd, const std::vector<std::string>& args,
                            const std::vector<std::string>& allowed, OrchestrationFlags* f) {
  auto ok = [&](const std::string& flag) {
    for (const auto& a : allowed) if (a == flag) return true;
    return false;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string v;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      v = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      has_inline = true;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(kOrchestrationUsage, stdout);
      return 0;
    }
    if (a == "-f") a = "--file";
    if (!ok(a)) return UsageError("unknown flag for " + cmd + ": " + a, kOrchestrationUsage);
    if (a == "--json") { f->json = true; continue; }
    if (a == "--skip-weights") { f->skip_weights = true; continue; }
    if (a == "--rehash") { f->rehash = true; continue; }
    if (!has_inline) {
      if (i + 1 >= args.size()) return UsageError(a + " needs a value", kOrchestrationUsage);
      v = args[++i];
    }
    if (a == "--file") f->file = v;
    else if (a == "--state-dir") f->state_dir = v;
    else if (a == "--metrics-listen") f->metrics_listen = v;
    else if (a == "--interval" && !ParseSeconds(v.c_str(), &f->interval)) {
      return UsageError("--interval needs a number of seconds", kOrchestrationUsage);
    }
  }
  return -1;  // parsed; run the command
}

int Orchestrate(const std::string& cmd, const std::vector<std::string>& args) {
  using namespace tandem::controller;
  OrchestrationFlags f;
  std::vector<std::string> allowed = {"--file"};
  if (cmd != "down") allowed.push_back("--state-dir");
  if (cmd == "up" || cmd == "serve") allowed.push_back("--skip-weights");
  if (cmd == "up") allowed.push_back("--rehash");
  if (cmd == "status") allowed.push_back("--json");
  if (cmd == "serve") allowed.insert(allowed.end(), {"--metrics-listen", "--interval"});
  if (int rc = ParseOrchestrationFlags(cmd, args, allowed, &f); rc >= 0) return rc;
  if (cmd == "up") return RunUp({f.file, f.state_dir, !f.skip_weights, f.rehash});
  if (cmd == "down") return RunDown({f.file});
  if (cmd == "status") return RunStatus({f.file, f.state_dir, f.json});
  if (cmd == "probe") return RunProbeCommand({f.file, f.state_dir});
  ServeCommandOptions so;
  so.cluster_file = f.file;
  so.state_dir = f.state_dir;
  so.metrics_listen = f.metrics_listen;
  so.loop_interval = f.interval;
  so.hash_weights = !f.skip_weights;
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  return RunServe(so, &g_stop);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return UsageError("no command given", kUsage);
  std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "version" || cmd == "--version") {
    std::printf("tandemctl %s\n", tandem::Version());
    return 0;
  }
  if (cmd == "preflight") return Preflight(rest);
  if (cmd == "certs") return tandem::controller::RunCertsCommand(rest);
  if (cmd == "up" || cmd == "down" || cmd == "status" || cmd == "probe" || cmd == "serve") return Orchestrate(cmd, rest);
  struct Planned {
    const char* name;
    const char* issue;
  };
  static const Planned kPlanned[] = {{"bench", "no issue yet"}, {"linktest", "no issue yet"}};
  for (const auto& p : kPlanned) {
    if (cmd == p.name) {
      std::fprintf(stderr, "tandemctl %s: not implemented yet (%s)\n", p.name, p.issue);
      return 2;
    }
  }
  return UsageError("unknown command: " + cmd, kUsage);
}
