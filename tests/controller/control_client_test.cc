// controller/control_client.h: how the controller reads a failed LoadModel or JoinGroup. With the
// agent's ControlError details a status is the agent's answer, worded as the operator saw it
// before the details existed; without them it is a transport or auth error (ControlRpcError).
#include "controller/control_client.h"

#include <gtest/gtest.h>

namespace tandem::controller {
namespace {

using namespace std::chrono_literals;

grpc::Status FromAgent(grpc::StatusCode code, const std::string& message, v1::ControlError::Outcome outcome) {
  v1::ControlError e;
  e.set_code(static_cast<int>(code));
  e.set_message(message);
  e.set_outcome(outcome);
  return grpc::Status(code, message, e.SerializeAsString());
}

TEST(ControlClientTest, TheAgentsAnswersAreNotTransportErrors) {
  // A join that ran and failed: the agent's text as it is (what the rank reports).
  absl::Status st = ControlOpError(
      FromAgent(grpc::StatusCode::DEADLINE_EXCEEDED, "join of generation 4 failed: rendezvous timed out",
                v1::ControlError::FAILED),
      "JoinGroup", 60s);
  EXPECT_TRUE(absl::IsDeadlineExceeded(st));
  EXPECT_EQ(st.message(), "join of generation 4 failed: rendezvous timed out");
  // A busy rank: the agent's UNAVAILABLE is "retry", not "unreachable".
  st = ControlOpError(FromAgent(grpc::StatusCode::UNAVAILABLE, "another load, join or leave is in progress",
                                v1::ControlError::REFUSED),
                      "LoadModel", 60s);
  EXPECT_TRUE(absl::IsUnavailable(st));
  EXPECT_EQ(st.message(), "LoadModel: another load, join or leave is in progress");
  st = ControlOpError(FromAgent(grpc::StatusCode::FAILED_PRECONDITION, "no model is loaded: LoadModel first",
                                v1::ControlError::REFUSED),
                      "JoinGroup", 60s);
  EXPECT_EQ(st.message(), "JoinGroup: no model is loaded: LoadModel first");
}

TEST(ControlClientTest, WithoutDetailsItIsTheTransport) {
  const grpc::Status deadline(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  EXPECT_EQ(ControlOpError(deadline, "JoinGroup", 1500ms).message(), "JoinGroup: no answer within 1.5 s");
  EXPECT_EQ(ControlOpError(deadline, "JoinGroup", 1500ms), ControlRpcError(deadline, "JoinGroup", 1500ms));
  const grpc::Status refused(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses");
  EXPECT_EQ(ControlOpError(refused, "LoadModel", 1s), ControlRpcError(refused, "LoadModel", 1s));
  // Details that are not a ControlError (or say nothing) do not count.
  const grpc::Status other(grpc::StatusCode::UNAVAILABLE, "x", "\xff\xff garbage");
  EXPECT_EQ(ControlOpError(other, "LoadModel", 1s), ControlRpcError(other, "LoadModel", 1s));
  const grpc::Status empty(grpc::StatusCode::UNAVAILABLE, "x", v1::ControlError().SerializeAsString());
  EXPECT_EQ(ControlOpError(empty, "LoadModel", 1s), ControlRpcError(empty, "LoadModel", 1s));
}

}  // namespace
}  // namespace tandem::controller
