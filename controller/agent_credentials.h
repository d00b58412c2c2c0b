// How the controller proves itself to the agents: the cluster token (auth.token_file) in every
// call's metadata, over mutual TLS when cluster.yaml has `tls:` (the controller's client
// certificate, the cluster CA that signs the agents'). Loaded once per command and shared by every
// client it makes.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"
#include "controller/cluster_spec.h"

namespace tandem::controller {

struct AgentCredentials {
  std::string token;                                  // "" = none
  std::shared_ptr<grpc::ChannelCredentials> channel;  // null = plaintext
  std::string tls_subject;                            // of the controller's certificate ("" without TLS)

  bool tls() const { return channel != nullptr; }
  // The channel credentials to dial with (plaintext when TLS is off).
  std::shared_ptr<grpc::ChannelCredentials> Channel() const;
};

// Reads auth.token_file (a secret file: mode 0600, >= 16 bytes) and the tls files named in the
// spec. FailedPrecondition / InvalidArgument naming the key and the file.
absl::StatusOr<AgentCredentials> LoadAgentCredentials(const ClusterSpec& spec);

// A hint appended to an "unreachable" error whose text looks like a failed TLS handshake (gRPC
// reports those as UNAVAILABLE with the SSL error inside); "" otherwise.
std::string TlsHint(const std::string& grpc_error_message);

}  // namespace tandem::controller
