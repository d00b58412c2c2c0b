// Where the agent's gRPC port may listen. An agent that authenticates nobody (no cluster token,
// no mutual TLS) stays on loopback: a network address needs authentication or an explicit
// --insecure, which preflight then reports as a failed check.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace tandem::agentd {

inline constexpr const char* kDefaultListen = "0.0.0.0:50051";   // with authentication
inline constexpr const char* kLoopbackListen = "127.0.0.1:50051";  // without

struct ListenDecision {
  std::string address;
  bool insecure = false;  // a network address without authentication (--insecure was given)
};

// `requested` "" = the default for the authentication at hand. FailedPrecondition (naming the
// address and the flags that fix it) for a non-loopback address without authentication and
// without `insecure_flag`.
absl::StatusOr<ListenDecision> DecideListen(const std::string& requested, bool authenticated, bool insecure_flag);

}  // namespace tandem::agentd
