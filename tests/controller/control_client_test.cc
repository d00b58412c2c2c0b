// controller/control_client.h: how the controller reads a failed AgentControl call. With the
// agent's ControlError details a status is the agent's answer (LoadModel and JoinGroup worded as
// the operator saw them before the details existed; LeaveGroup, SetServing and Generate as "the
// agent answered CODE"); without them it is a transport or auth error (AgentRpcError).
#include "controller/control_client.h"

#include <gtest/gtest.h>

#include "controller/rpc_error.h"
#include "tests/controller/agent_answer.h"

namespace tandem::controller {
namespace {

using namespace std::chrono_literals;

TEST(ControlClientTest, TheAgentsAnswersAreNotTransportErrors) {
  // A join that ran and failed: the agent's text as it is (what the rank reports).
  absl::Status st = ControlOpError(
      AgentAnswer(grpc::StatusCode::DEADLINE_EXCEEDED, "join of generation 4 failed: rendezvous timed out",
                  v1::ControlError::FAILED),
      "JoinGroup", 60s);
  EXPECT_TRUE(absl::IsDeadlineExceeded(st));
  EXPECT_EQ(st.message(), "join of generation 4 failed: rendezvous timed out");
  // A busy rank: the agent's UNAVAILABLE is "retry", not "unreachable".
  st = ControlOpError(AgentAnswer(grpc::StatusCode::UNAVAILABLE, "another load, join or leave is in progress",
                                  v1::ControlError::REFUSED),
                      "LoadModel", 60s);
  EXPECT_TRUE(absl::IsUnavailable(st));
  EXPECT_EQ(st.message(), "LoadModel: another load, join or leave is in progress");
  st = ControlOpError(AgentAnswer(grpc::StatusCode::FAILED_PRECONDITION, "no model is loaded: LoadModel first",
                                  v1::ControlError::REFUSED),
                      "JoinGroup", 60s);
  EXPECT_EQ(st.message(), "JoinGroup: no model is loaded: LoadModel first");
}

TEST(ControlClientTest, WithoutDetailsItIsTheTransport) {
  const grpc::Status deadline(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  EXPECT_EQ(ControlOpError(deadline, "JoinGroup", 1500ms).message(), "JoinGroup: no answer within 1.5 s (agent down, firewalled or busy?)");
  EXPECT_EQ(ControlOpError(deadline, "JoinGroup", 1500ms), AgentRpcError(deadline, "JoinGroup", 1500ms));
  const grpc::Status refused(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses");
  EXPECT_EQ(ControlOpError(refused, "LoadModel", 1s), AgentRpcError(refused, "LoadModel", 1s));
  // Details that are not a ControlError (or say nothing) do not count.
  const grpc::Status other(grpc::StatusCode::UNAVAILABLE, "x", "\xff\xff garbage");
  EXPECT_EQ(ControlOpError(other, "LoadModel", 1s), AgentRpcError(other, "LoadModel", 1s));
  const grpc::Status empty(grpc::StatusCode::UNAVAILABLE, "x", v1::ControlError().SerializeAsString());
  EXPECT_EQ(ControlOpError(empty, "LoadModel", 1s), AgentRpcError(empty, "LoadModel", 1s));
}

// Generate and LeaveGroup: the agent's own UNAVAILABLE and DEADLINE_EXCEEDED are its answer, with
// its code and message; the same codes from the transport keep their words.
TEST(ControlClientTest, AnAgentsAnswerToAProbeOrALeaveIsNotTheTransport) {
  struct Case {
    const char* what;
    grpc::StatusCode code;
    const char* message;
    v1::ControlError::Outcome outcome;
    const char* shown;
  };
  const Case cases[] = {
      {"Generate", grpc::StatusCode::UNAVAILABLE, "the probe failed: engine stopped", v1::ControlError::PROBE_FAILED,
       "Generate: the agent answered UNAVAILABLE: the probe failed: engine stopped"},
      {"Generate", grpc::StatusCode::DEADLINE_EXCEEDED, "the probe did not finish within 3000 ms",
       v1::ControlError::PROBE_FAILED,
       "Generate: the agent answered DEADLINE_EXCEEDED: the probe did not finish within 3000 ms"},
      {"Generate", grpc::StatusCode::FAILED_PRECONDITION, "cannot generate: this rank is loaded",
       v1::ControlError::REFUSED,
       "Generate: the agent answered FAILED_PRECONDITION: cannot generate: this rank is loaded"},
      {"LeaveGroup", grpc::StatusCode::DEADLINE_EXCEEDED, "another operation did not stop in time",
       v1::ControlError::FAILED,
       "LeaveGroup: the agent answered DEADLINE_EXCEEDED: another operation did not stop in time"},
  };
  for (const Case& c : cases) {
    const absl::Status st = ControlAnswerError(AgentAnswer(c.code, c.message, c.outcome), c.what, 5s);
    EXPECT_EQ(static_cast<int>(st.code()), static_cast<int>(c.code)) << c.shown;
    EXPECT_EQ(st.message(), c.shown);
  }

  // The transport: unreachable and silent agents read as before.
  const grpc::Status refused(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses");
  EXPECT_EQ(ControlAnswerError(refused, "Generate", 5s).message(),
            "Generate: unreachable: failed to connect to all addresses");
  const grpc::Status silent(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  EXPECT_EQ(ControlAnswerError(silent, "Generate", 5s).message(), "Generate: no answer within 5.0 s (agent down, firewalled or busy?)");
  EXPECT_EQ(ControlAnswerError(silent, "LeaveGroup", 4s), AgentRpcError(silent, "LeaveGroup", 4s));
  const grpc::Status empty(grpc::StatusCode::UNAVAILABLE, "x", v1::ControlError().SerializeAsString());
  EXPECT_EQ(ControlAnswerError(empty, "LeaveGroup", 4s), AgentRpcError(empty, "LeaveGroup", 4s));
}

}  // namespace
}  // namespace tandem::controller
