// controller/rpc_error.h: one wording for a call the agent did not answer itself, whichever client
// made it; the agent's own answers keep their code.
#include "controller/rpc_error.h"

#include <gtest/gtest.h>

namespace tandem::controller {
namespace {

using namespace std::chrono_literals;

TEST(AgentRpcErrorTest, TransportAndAuthSayWhatToCheck) {
  const absl::Status deadline = AgentRpcError(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "x"), "GetFacts", 2500ms);
  EXPECT_EQ(deadline.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(deadline.message(), "GetFacts: no answer within 2.5 s (agent down, firewalled or busy?)");

  const absl::Status down = AgentRpcError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), "JoinGroup", 1s);
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(down.message(), "JoinGroup: unreachable: connection refused");

  const absl::Status token = AgentRpcError(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad token"), "GetStatus", 1s);
  EXPECT_EQ(token.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(token.message(),
            "GetStatus: rejected by the agent: bad token (check auth.token_file in cluster.yaml against the agent's "
            "--token-file)");

  const absl::Status old = AgentRpcError(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""), "LoadModel", 1s);
  EXPECT_EQ(old.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(old.message().find("older tandem-agentd"), absl::string_view::npos) << old;
}

TEST(AgentRpcErrorTest, TheAgentsOwnAnswerKeepsItsCode) {
  const absl::Status st = AgentRpcError(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "/etc is outside --model-root"),
                                        "HashWeights", 1s);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(st.message(), "HashWeights: /etc is outside --model-root");
}

}  // namespace
}  // namespace tandem::controller
