#include "controller/cluster_agents.h"

#include "controller/control_client.h"

namespace tandem::controller {
namespace {

class GrpcNodeControl final : public NodeControl {
 public:
  GrpcNodeControl(const std::string& agent, const AgentCredentials& credentials) : client_(agent, credentials) {}

  absl::StatusOr<v1::LoadModelEvent> LoadModel(const v1::LoadModelRequest& req, std::chrono::milliseconds timeout,
                                               const std::function<void(const v1::LoadModelEvent&)>& on_event) override {
    return client_.LoadModel(req, timeout, on_event);
  }
  absl::StatusOr<v1::JoinGroupResponse> JoinGroup(const v1::JoinGroupRequest& req,
                                                  std::chrono::milliseconds timeout) override {
    return client_.JoinGroup(req, timeout);
  }
  absl::Status LeaveGroup(bool unload, const std::string& reason, std::chrono::milliseconds timeout) override {
    return client_.LeaveGroup(unload, reason, timeout);
  }
  absl::Status SetServing(bool serving, std::chrono::milliseconds timeout) override {
    return client_.SetServing(serving, timeout);
  }
  absl::StatusOr<v1::GenerateResponse> Generate(const v1::GenerateRequest& req,
                                                std::chrono::milliseconds timeout) override {
    return client_.Generate(req, timeout);
  }
  absl::StatusOr<v1::RankStatus> GetStatus(std::chrono::milliseconds timeout) override {
    return client_.GetStatus(timeout);
  }
  absl::StatusOr<v1::CheckFabricResponse> CheckFabric(const v1::CheckFabricRequest& req,
                                                      std::chrono::milliseconds timeout) override {
    return client_.CheckFabric(req, timeout);
  }

 private:
  ControlClient client_;
};

class GrpcClusterAgentsImpl final : public ClusterAgents {
 public:
  explicit GrpcClusterAgentsImpl(AgentCredentials credentials) : credentials_(std::move(credentials)) {}

  std::unique_ptr<NodeControl> Control(const std::string& agent) override {
    return std::make_unique<GrpcNodeControl>(agent, credentials_);
  }
  std::vector<NodeObservation> Observe(const ClusterSpec& spec, const ObserveOptions& options) override {
    return ObserveNodes(spec, options);
  }

 private:
  const AgentCredentials credentials_;
};

}  // namespace

std::shared_ptr<ClusterAgents> GrpcClusterAgents(const AgentCredentials& credentials) {
  return std::make_shared<GrpcClusterAgentsImpl>(credentials);
}

}  // namespace tandem::controller
