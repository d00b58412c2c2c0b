// The cluster token: every AgentControl RPC (the rendezvous store included) and the Agent
// service need "authorization: Bearer <token>" when the agent runs with --token-file. The token
// is compared in constant time and never logged; a refusal is logged with the caller's address.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace tandem::agentd {

// Reads the token file (common/secret_file.h): trailing whitespace is stripped; FailedPrecondition
// naming the file when it cannot be read, is readable by group/others, or holds < 16 bytes.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// True when a == b; the time taken depends only on the lengths, not on where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class TokenAuth {
 public:
  // "" = no token configured: every call is let through.
  explicit TokenAuth(std::string token = "") : token_(std::move(token)) {}
  bool enabled() const { return !token_.empty(); }

  // OK, or UNAUTHENTICATED (missing or wrong token), logged with the peer and `method`.
  grpc::Status Check(const grpc::ServerContext& context, const char* method) const;

  // Client side: adds the metadata a Check expects (nothing when `token` is empty).
  static void AddTo(grpc::ClientContext* context, const std::string& token);

 private:
  std::string token_;
};

}  // namespace tandem::agentd
