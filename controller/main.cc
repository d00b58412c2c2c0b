// tandemctl: subcommand dispatch and flags only; everything else lives in tandem_controller.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/version.h"
#include "controller/preflight_command.h"

namespace {

constexpr char kUsage[] =
    "tandemctl: the tandem controller. Reads cluster.yaml and talks to every node's tandem-agentd.\n"
    "\n"
    "usage: tandemctl <command> [flags]\n"
    "\n"
    "commands:\n"
    "  preflight   check every node against the others before anything starts (driver, kernel,\n"
    "              agent build, weights, RoCE GID index, NICs, memory, model folder)\n"
    "  up          bring the cluster up                       (not implemented yet: issue 5)\n"
    "  down        stop serving and unload                    (not implemented yet: issue 5)\n"
    "  status      show every node's state                    (not implemented yet: issue 5)\n"
    "  probe       run one inference probe through the head   (not implemented yet: issue 5)\n"
    "  serve       keep the cluster serving (reconciler)      (not implemented yet: issue 5)\n"
    "  bench       load-test the serving cluster              (not implemented yet: no issue yet)\n"
    "  linktest    measure the fabric between the nodes       (not implemented yet: no issue yet)\n"
    "  version     print the version\n"
    "\n"
    "Run `tandemctl <command> --help` for a command's flags. The cluster.yaml schema is in\n"
    "docs/cluster-yaml.md; the preflight checks and their fixes in docs/preflight.md.\n";

constexpr char kPreflightUsage[] =
    "usage: tandemctl preflight [-f cluster.yaml] [--json] [--skip-weights]\n"
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
  struct Planned {
    const char* name;
    const char* issue;
  };
  static const Planned kPlanned[] = {{"up", "issue 5"},     {"down", "issue 5"},  {"status", "issue 5"},
                                     {"probe", "issue 5"},  {"serve", "issue 5"}, {"bench", "no issue yet"},
                                     {"linktest", "no issue yet"}};
  for (const auto& p : kPlanned) {
    if (cmd == p.name) {
      std::fprintf(stderr, "tandemctl %s: not implemented yet (%s)\n", p.name, p.issue);
      return 2;
    }
  }
  return UsageError("unknown command: " + cmd, kUsage);
}
