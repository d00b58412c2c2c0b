// How the controller words a failed call to an agent when the agent itself did not answer it:
// one wording for every client (AgentService: facts, hashing; AgentControl: orchestration), so an
// operator reads the same "GetFacts: unreachable: ..." or "JoinGroup: no answer within 30.0 s"
// whichever call hit the problem. Answers the agent sent itself keep their code (rpc/grpc_status.h).
#pragma once

#include <chrono>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tandem::controller {

// `what` names the call ("JoinGroup"); `timeout` is the deadline the call had. DEADLINE_EXCEEDED,
// UNAVAILABLE, UNAUTHENTICATED and UNIMPLEMENTED say what to check; any other code is the agent's
// own answer: the same code, the message prefixed with `what`.
absl::Status AgentRpcError(const grpc::Status& st, const char* what, std::chrono::milliseconds timeout);

}  // namespace tandem::controller
