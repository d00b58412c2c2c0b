#include "controller/agent_credentials.h"

#include "common/secret_file.h"
#include "common/status.h"
#include "rpc/tls.h"

namespace tandem::controller {

std::shared_ptr<grpc::ChannelCredentials> AgentCredentials::Channel() const {
  return channel ? channel : grpc::InsecureChannelCredentials();
}

absl::StatusOr<AgentCredentials> LoadAgentCredentials(const ClusterSpec& spec) {
  AgentCredentials c;
  if (!spec.auth_token_file.empty()) {
    ASSIGN_OR_RETURN(c.token, ReadSecretFile(spec.auth_token_file, "auth.token_file"));
  }
  ASSIGN_OR_RETURN(std::optional<rpc::TlsMaterial> tls,
                   rpc::LoadTls(rpc::TlsFiles{spec.tls_ca, spec.tls_cert, spec.tls_key}, spec.file + ": tls"));
  if (tls) {
    c.channel = rpc::ChannelCredentials(tls);
    c.tls_subject = tls->subject;
  }
  return c;
}

std::string TlsHint(const std::string& m) {
  if (m.find("SSL") != std::string::npos || m.find("ssl") != std::string::npos ||
      m.find("handshake") != std::string::npos || m.find("Socket closed") != std::string::npos) {
    return " (a TLS mismatch? cluster.yaml tls: and the agent's --tls-cert/--tls-key/--tls-ca must both be set, "
           "with certificates of the same CA)";
  }
  return "";
}

}  // namespace tandem::controller
