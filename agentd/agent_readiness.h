// What systemd is told about a started agent (common/systemd_notify.h). Ready means a controller
// can use it: the gRPC server answers and the node facts can be read. Both are proved the way a
// controller would see them, by calling the agent's own server through an in-process channel
// (the same handler threads, the same token check), not by trusting that BuildAndStart returned.
// While serving, each watchdog ping vouches for a GetStatus answered within a deadline: a wedged
// server or an EngineHost stuck holding its lock stops the pings and systemd restarts the agent.
#pragma once

#include <signal.h>

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "tandem/v1/agent.grpc.pb.h"

namespace tandem::agentd {

class AgentSelfCheck {
 public:
  // `server` (not owned) must hold the Agent and AgentControl services; `token` is the cluster
  // token ("" = none).
  AgentSelfCheck(grpc::Server* server, std::string token);

  // GetFacts through the server: OK once the facts can be served.
  absl::Status CheckFacts(std::chrono::milliseconds deadline);
  // GetStatus through the server.
  absl::StatusOr<v1::RankStatus> CheckStatus(std::chrono::milliseconds deadline);

 private:
  std::string token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Agent::Stub> agent_;
  std::unique_ptr<v1::AgentControl::Stub> control_;
};

// "loading rank 1 (gen 3)" style one-liners of a rank's status for STATUS=.
std::string RankStatusLine(const v1::RankStatus& status);

// Checks the facts (UnavailableError when they cannot be served), sends READY=1 with `status`,
// then waits for one of `stop_signals` and returns it. Every watchdog interval (when the unit
// has one) it runs CheckStatus and pings only when that answers, updating STATUS= when the rank's
// line changes.
absl::StatusOr<int> AnnounceReadyAndWait(AgentSelfCheck& check, const std::string& status,
                                         const sigset_t& stop_signals);

}  // namespace tandem::agentd
