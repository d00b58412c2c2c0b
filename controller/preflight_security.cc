#include "controller/preflight_security.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net_address.h"

namespace tandem::controller {
namespace {

constexpr int64_t kExpiryWarnSeconds = 30 * 24 * 3600;

}  // namespace

CheckResult CheckAgentSecurity(const NodeSpec& node, const v1::NodeFacts& facts, int64_t now_unix) {
  CheckResult row{kCheckAgentSecurity, node.name, CheckStatus::kPass, "",
                  "cluster token or mutual TLS; TLS when the agent listens beyond loopback", ""};
  if (!facts.has_security()) {
    row.status = CheckStatus::kWarn;
    row.found = "not reported (an agent build older than the security facts)";
    row.fix = "deploy the same, current tandem-agentd build on every node";
    return row;
  }
  const v1::SecurityFact& s = facts.security();
  std::vector<std::string> parts;
  if (s.token_auth()) parts.push_back("token");
  if (s.client_cert_required()) parts.push_back(absl::StrCat("mutual TLS (", s.tls_subject(), ")"));
  else if (s.tls()) parts.push_back("TLS");
  if (parts.empty()) parts.push_back("no authentication");
  parts.push_back(absl::StrCat("on ", s.listen(), s.loopback_only() ? " (loopback)" : ""));
  if (s.model_roots_size() > 0) parts.push_back(absl::StrCat("model roots ", absl::StrJoin(s.model_roots(), ",")));
  row.found = absl::StrJoin(parts, ", ");

  if (s.insecure()) {
    row.status = CheckStatus::kFail;
    row.found = absl::StrCat("--insecure: ", row.found);
    row.fix = "start the agent with --token-file (and --tls-cert/--tls-key/--tls-ca) instead of --insecure";
  } else if (!s.token_auth() && !s.client_cert_required()) {
    row.status = CheckStatus::kFail;
    row.fix = "start the agent with --token-file (mode 0600) and set auth.token_file in cluster.yaml; "
              "add TLS with `tandemctl certs`";
  } else if (!s.tls() && !s.loopback_only()) {
    row.status = CheckStatus::kFail;
    row.found = absl::StrCat(row.found, "; plaintext: the cluster token crosses the network in clear");
    row.fix = "make certificates with `tandemctl certs -f cluster.yaml --out DIR`, start the agent with "
              "--tls-cert/--tls-key/--tls-ca and set tls: in cluster.yaml";
  } else if (s.tls() && s.tls_not_after_unix() > 0) {
    const int64_t left = s.tls_not_after_unix() - now_unix;
    if (left <= 0) {
      row.status = CheckStatus::kFail;
      row.found = absl::StrCat(row.found, "; the agent's certificate has expired");
      row.fix = "make new certificates (`tandemctl certs --force`) and restart the agent";
    } else if (left < kExpiryWarnSeconds) {
      row.status = CheckStatus::kWarn;
      row.found = absl::StrCat(row.found, "; the agent's certificate expires in ", left / 86400, " days");
      row.fix = "renew the certificates (`tandemctl certs --force`) and restart the agents";
    }
  }
  return row;
}

CheckResult CheckApiAuth(const ClusterSpec& spec) {
  const std::string head = spec.nodes.empty() ? "" : spec.nodes[0].name;
  const std::string listen = spec.api_listen.empty() ? "127.0.0.1:8000" : spec.api_listen;
  CheckResult row{kCheckApiAuth, head, CheckStatus::kPass, "", "api.key_file when api.listen is not loopback", ""};
  const bool loopback = IsLoopbackHost(listen);
  const bool key = !spec.api_key_file.empty();
  row.found = absl::StrCat("api.listen ", listen, loopback ? " (loopback)" : "", key ? ", API key required" : ", no API key");
  if (!loopback && !key) {
    row.status = CheckStatus::kFail;
    row.fix = "set api.key_file (a 0600 file with the key clients send as 'Authorization: Bearer KEY') or listen on 127.0.0.1";
  } else if (!loopback) {
    // The API speaks plain HTTP: the key and the prompts cross the network in clear.
    row.status = CheckStatus::kWarn;
    row.found += "; plain HTTP";
    row.fix = "keep the API on a trusted network, or put a TLS-terminating proxy in front of it";
  }
  return row;
}

}  // namespace tandem::controller
