// gRPC client for the agents' AgentControl service (orchestration). Every call carries the
// cluster token ("authorization: Bearer <token>") when one is configured, and a deadline.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "controller/agent_credentials.h"
#include "tandem/v1/agent.grpc.pb.h"

namespace tandem::controller {

// LoadModel and JoinGroup: a status with the agent's ControlError details is the agent's own
// answer, never read as a transport error (its UNAVAILABLE is "busy, retry", not "unreachable"):
// a refusal reads "JoinGroup: <why>", a load or join that ran and failed reads as the agent wrote
// it (the rank's failure). Without the details (transport, auth): AgentRpcError
// (controller/rpc_error.h).
absl::Status ControlOpError(const grpc::Status& st, const char* what, std::chrono::milliseconds timeout);
// LeaveGroup, SetServing and Generate: a status with the agent's ControlError details reads
// "Generate: the agent answered DEADLINE_EXCEEDED: <its message>" (with the code: the agent's
// UNAVAILABLE or DEADLINE_EXCEEDED is not "unreachable" or "no answer within N s"). Without the
// details (transport, auth): AgentRpcError, as for every other call.
absl::Status ControlAnswerError(const grpc::Status& st, const char* what, std::chrono::milliseconds timeout);

class ControlClient {
 public:
  ControlClient(const std::string& address, const AgentCredentials& credentials);

  const std::string& address() const { return address_; }

  // Streams progress to `on_event` (on this thread); returns the final event of a load that
  // succeeded, or why it did not (ControlOpError).
  absl::StatusOr<v1::LoadModelEvent> LoadModel(const v1::LoadModelRequest& req, std::chrono::milliseconds timeout,
                                               const std::function<void(const v1::LoadModelEvent&)>& on_event);
  absl::StatusOr<v1::JoinGroupResponse> JoinGroup(const v1::JoinGroupRequest& req, std::chrono::milliseconds timeout);
  absl::Status LeaveGroup(bool unload, const std::string& reason, std::chrono::milliseconds timeout);
  absl::Status SetServing(bool serving, std::chrono::milliseconds timeout);
  absl::StatusOr<v1::GenerateResponse> Generate(const v1::GenerateRequest& req, std::chrono::milliseconds timeout);
  absl::StatusOr<v1::RankStatus> GetStatus(std::chrono::milliseconds timeout);
  // The agent's refusal or failed check reads as ControlAnswerError ("CheckFabric: the agent
  // answered DEADLINE_EXCEEDED: rank 1 of 2 did not join ...").
  absl::StatusOr<v1::CheckFabricResponse> CheckFabric(const v1::CheckFabricRequest& req,
                                                      std::chrono::milliseconds timeout);

 private:
  void Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) const;

  std::string address_;
  std::string token_;
  std::unique_ptr<v1::AgentControl::Stub> stub_;
};

}  // namespace tandem::controller
