// How the cluster operations reach the agents. tandemctl talks gRPC (ControlClient for the
// AgentControl service, ObserveNodes' AgentClient for preflight's facts and manifests); the
// unit test of the bring-up scripts a fake, so every phase and failure of `up` runs without a
// network.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/agent_client.h"
#include "controller/agent_credentials.h"
#include "controller/cluster_spec.h"
#include "controller/preflight.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

// One agent's AgentControl service: the calls the cluster operations make, each with its deadline.
class NodeControl {
 public:
  virtual ~NodeControl() = default;
  // Streams progress to `on_event` (on the calling thread); returns the final event.
  virtual absl::StatusOr<v1::LoadModelEvent> LoadModel(const v1::LoadModelRequest& req,
                                                       std::chrono::milliseconds timeout,
                                                       const std::function<void(const v1::LoadModelEvent&)>& on_event) = 0;
  virtual absl::StatusOr<v1::JoinGroupResponse> JoinGroup(const v1::JoinGroupRequest& req,
                                                          std::chrono::milliseconds timeout) = 0;
  virtual absl::Status LeaveGroup(bool unload, const std::string& reason, std::chrono::milliseconds timeout) = 0;
  virtual absl::Status SetServing(bool serving, std::chrono::milliseconds timeout) = 0;
  virtual absl::StatusOr<v1::GenerateResponse> Generate(const v1::GenerateRequest& req,
                                                        std::chrono::milliseconds timeout) = 0;
  virtual absl::StatusOr<v1::RankStatus> GetStatus(std::chrono::milliseconds timeout) = 0;
  // The fabric check (controller/fabric_check.h); a fake that does not script it says so.
  virtual absl::StatusOr<v1::CheckFabricResponse> CheckFabric(const v1::CheckFabricRequest&,
                                                              std::chrono::milliseconds) {
    return absl::UnimplementedError("CheckFabric is not available here");
  }
};

// Every agent of the cluster. Called from several threads at once (one per node).
class ClusterAgents {
 public:
  virtual ~ClusterAgents() = default;
  // A client of the agent at `agent` (HOST:PORT); cheap, one per call site and thread.
  virtual std::unique_ptr<NodeControl> Control(const std::string& agent) = 0;
  // Preflight's observations: facts, then the weights manifest. Result i belongs to spec.nodes[i].
  virtual std::vector<NodeObservation> Observe(const ClusterSpec& spec, const ObserveOptions& options) = 0;
};

// The agents over gRPC, with the cluster token and TLS.
std::shared_ptr<ClusterAgents> GrpcClusterAgents(const AgentCredentials& credentials);

}  // namespace tandem::controller
