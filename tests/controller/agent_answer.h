// The gRPC status an agent's AgentControl handler answers with when it does not succeed: the code
// and message, and a ControlError in the error details (what agentd/control_service.cc sends). A
// status without the details is what the transport makes (unreachable, deadline, auth).
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

inline grpc::Status AgentAnswer(grpc::StatusCode code, const std::string& message,
                                v1::ControlError::Outcome outcome) {
  v1::ControlError e;
  e.set_code(static_cast<int>(code));
  e.set_message(message);
  e.set_outcome(outcome);
  return grpc::Status(code, message, e.SerializeAsString());
}

}  // namespace tandem::controller
