#include "controller/rpc_error.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/agent_credentials.h"
#include "rpc/grpc_status.h"

namespace tandem::controller {

absl::Status AgentRpcError(const grpc::Status& st, const char* what, std::chrono::milliseconds timeout) {
  switch (st.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(absl::StrFormat("%s: no answer within %.1f s (agent down, firewalled or busy?)",
                                                         what, timeout.count() / 1000.0));
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(absl::StrCat(what, ": unreachable: ", st.error_message(), TlsHint(st.error_message())));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(absl::StrCat(
          what, ": rejected by the agent: ", st.error_message(),
          " (check auth.token_file in cluster.yaml against the agent's --token-file)"));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::UnimplementedError(absl::StrCat(what, ": the agent does not offer this call (an older tandem-agentd?)"));
    default:
      return rpc::FromGrpcStatus(st, what);
  }
}

}  // namespace tandem::controller
