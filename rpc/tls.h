// Mutual TLS for every gRPC connection of a cluster: agents serve with a node certificate and
// require a client certificate of the cluster CA; the controller and the agents' store clients
// present theirs. The PEM files come from `tandemctl certs` or the operator's own PKI
// (docs/security.md). A private key file must be readable by its owner only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace tandem::rpc {

// Paths as configured (flags or cluster.yaml). All three or none.
struct TlsFiles {
  std::string ca;    // CA certificate(s) that sign the peers' certificates
  std::string cert;  // this side's certificate (chain), PEM
  std::string key;   // its private key, PEM, mode 0600
  bool any() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

// The loaded and checked PEM texts, plus what a report shows of them.
struct TlsMaterial {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string subject;          // of the certificate, e.g. "CN=spark1"
  int64_t not_after_unix = 0;   // its expiry
};

// Reads and checks the three files: all given, readable, PEM that parses, the key matches the
// certificate, the certificate is signed by the CA and not expired (or not yet valid). `what`
// names the source in messages ("--tls-cert/--tls-key/--tls-ca", "cluster.yaml tls"). nullopt
// when no file is given. FailedPrecondition / InvalidArgument naming the file otherwise.
absl::StatusOr<std::optional<TlsMaterial>> LoadTls(const TlsFiles& files, const std::string& what);

// Server side: TLS with a required, verified client certificate when `tls` is set; plaintext
// otherwise.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const std::optional<TlsMaterial>& tls);

// Client side: TLS presenting this side's certificate when `tls` is set; plaintext otherwise.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const std::optional<TlsMaterial>& tls);

}  // namespace tandem::rpc
