#include "controller/certs_command.h"

#include <cstdio>
#include <ctime>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/cli.h"
#include "common/status.h"
#include "controller/cluster_certs.h"
#include "controller/cluster_spec.h"
#include "controller/preflight_command.h"

namespace tandem::controller {

constexpr char kCertsDescription[] =
    "make a cluster CA and per-node certificates for mutual TLS\n"
    "Makes a small CA for the cluster (ECDSA P-256) and, signed by it, one certificate per node (server and "
    "client: subjectAltName DNS:<name>, the host of nodes[].agent, localhost, 127.0.0.1, ::1) and a client "
    "certificate for tandemctl.";

constexpr char kCertsFooter[] =
    "Writes into DIR:\n"
    "  ca.pem ca.key                 the CA (reused when both exist, unless --force)\n"
    "  <node>.pem <node>.key         for each node's tandem-agentd (--tls-cert/--tls-key)\n"
    "  controller.pem controller.key for tandemctl (cluster.yaml tls.cert/tls.key)\n"
    "Keys are created mode 0600, certificates 0644. Details and rotation: docs/security.md.\n"
    "exit status: 0 written, 1 nothing or not all written (the message says why),\n"
    "             2 bad usage or cluster file.";

namespace {

std::string Date(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

void PrintFile(const std::string& path, const char* mode, const std::string& what) {
  std::printf("  %-34s %-5s %s\n", path.c_str(), mode, what.c_str());
}

void PrintResult(const ClusterSpec& spec, const ClusterCertOptions& options, const ClusterCertResult& r) {
  std::printf("CA %s: %s (until %s)\n", r.ca_reused ? "reused" : "made", r.ca.cert_path.c_str(),
              Date(r.ca_not_after_unix).c_str());
  std::printf("wrote (valid %d days, until %s):\n", options.days,
              Date(static_cast<int64_t>(std::time(nullptr)) + options.days * int64_t{86400}).c_str());
  if (!r.ca_reused) {
    PrintFile(r.ca.cert_path, "0644", "CA certificate: every node and tandemctl trust it");
    PrintFile(r.ca.key_path, "0600", "CA key: only for issuing certificates; keep it off the nodes");
  }
  for (const IssuedFiles& f : r.nodes) {
    PrintFile(f.cert_path, "0644", f.name + ": " + absl::StrJoin(f.subject_alt_names, ", "));
    PrintFile(f.key_path, "0600", f.name + "'s key");
  }
  PrintFile(r.controller.cert_path, "0644", "tandemctl's client certificate (CN=tandemctl)");
  PrintFile(r.controller.key_path, "0600", "its key");

  std::printf("\nnext steps:\n");
  std::printf("  1. copy to each node (the key stays 0600, owned by the agent's user):\n");
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    std::string host;
    int port = 0;
    if (!SplitHostPort(spec.nodes[i].agent, &host, &port)) host = spec.nodes[i].name;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    std::printf("       scp -p %s %s %s %s:/etc/tandem/tls/\n", r.ca.cert_path.c_str(), r.nodes[i].cert_path.c_str(),
                r.nodes[i].key_path.c_str(), host.c_str());
  }
  std::printf("  2. start each agent with (NAME = the node's name):\n");
  std::printf("       tandem-agentd ... --tls-cert /etc/tandem/tls/NAME.pem --tls-key /etc/tandem/tls/NAME.key \\\n"
              "                         --tls-ca /etc/tandem/tls/ca.pem\n");
  std::printf("  3. add to %s:\n", spec.file.c_str());
  std::printf("       tls:\n         ca: %s\n         cert: %s\n         key: %s\n", r.ca.cert_path.c_str(),
              r.controller.cert_path.c_str(), r.controller.key_path.c_str());
}

}  // namespace

absl::Status ParseSanFlag(const std::string& value, std::map<std::string, std::vector<std::string>>* out) {
  std::string node;
  for (absl::string_view item : absl::StrSplit(AsAbsl(value), ',')) {
    std::string extra(item);
    if (size_t eq = extra.find('='); eq != std::string::npos) {
      node = extra.substr(0, eq);
      extra = extra.substr(eq + 1);
      if (node.empty()) return absl::InvalidArgumentError("--san " + value + ": empty node name before '='");
    }
    if (node.empty()) return absl::InvalidArgumentError("--san " + value + ": expected NODE=EXTRA[,EXTRA...]");
    if (extra.empty()) return absl::InvalidArgumentError("--san " + value + ": empty name for node " + node);
    (*out)[node].push_back(extra);
  }
  return absl::OkStatus();
}

void AddCertsFlags(CLI::App* command, CertsCommandOptions* o) {
  command->description(kCertsDescription);
  command->footer(kCertsFooter);
  command->add_option("-f,--file", o->cluster_file, "cluster file")->type_name("PATH");
  command->add_option("--out", o->certs.out_dir, "where to write (created mode 0700 when missing)")
      ->type_name("DIR")
      ->required();
  command->add_option("--days", o->certs.days, "validity of the node and controller certificates")
      ->check(CLI::Range(1, 36500));
  // A malformed --san is a usage error at parse time, like any other bad value.
  cli::AddRepeated(command, "--san", &o->sans,
                   "extra subjectAltNames for NODE: an IP, a DNS name, or DNS:/IP: prefixed; repeatable, and one "
                   "value may name several nodes (a=X,Y,b=Z)")
      ->type_name("NODE=X,...")
      ->check([](const std::string& value) {
        std::map<std::string, std::vector<std::string>> ignored;
        absl::Status st = ParseSanFlag(value, &ignored);
        return st.ok() ? std::string() : std::string(st.message());
      });
  command->add_flag("--force", o->certs.force,
                    "replace existing files, the CA included (every node then needs new files)");
}

int RunCerts(const CertsCommandOptions& o) {
  ClusterCertOptions options = o.certs;
  for (const std::string& san : o.sans) {
    if (absl::Status st = ParseSanFlag(san, &options.extra_sans); !st.ok()) {
      std::fprintf(stderr, "tandemctl certs: %s\n", StatusText(st).c_str());
      return kExitBadConfig;
    }
  }
  absl::StatusOr<ClusterSpec> spec = LoadClusterSpec(o.cluster_file);
  if (!spec.ok()) {
    std::fprintf(stderr, "tandemctl certs: %s\n", StatusText(spec.status()).c_str());
    return kExitBadConfig;
  }
  absl::StatusOr<ClusterCertResult> result = WriteClusterCertificates(*spec, options);
  if (!result.ok()) {
    std::fprintf(stderr, "tandemctl certs: %s\n", StatusText(result.status()).c_str());
    return result.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadConfig : kExitChecksFailed;
  }
  PrintResult(*spec, options, *result);
  return kExitOk;
}

}  // namespace tandem::controller
