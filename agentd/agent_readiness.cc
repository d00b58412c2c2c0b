#include "agentd/agent_readiness.h"

#include "agentd/auth.h"
#include "common/log.h"
#include "common/systemd_notify.h"
#include "proto/rank_state.h"

namespace tandem::agentd {
namespace {

void Prepare(grpc::ClientContext* ctx, const std::string& token, std::chrono::milliseconds deadline) {
  ctx->set_deadline(std::chrono::system_clock::now() + deadline);
  TokenAuth::AddTo(ctx, token);
}

}  // namespace

AgentSelfCheck::AgentSelfCheck(grpc::Server* server, std::string token)
    : token_(std::move(token)),
      channel_(server->InProcessChannel(grpc::ChannelArguments())),
      agent_(v1::Agent::NewStub(channel_)),
      control_(v1::AgentControl::NewStub(channel_)) {}

absl::Status AgentSelfCheck::CheckFacts(std::chrono::milliseconds deadline) {
  grpc::ClientContext ctx;
  Prepare(&ctx, token_, deadline);
  v1::NodeFacts facts;
  const grpc::Status st = agent_->GetFacts(&ctx, v1::GetFactsRequest(), &facts);
  if (!st.ok()) return absl::UnavailableError("the agent's own GetFacts failed: " + st.error_message());
  return absl::OkStatus();
}

absl::StatusOr<v1::RankStatus> AgentSelfCheck::CheckStatus(std::chrono::milliseconds deadline) {
  grpc::ClientContext ctx;
  Prepare(&ctx, token_, deadline);
  v1::RankStatus status;
  const grpc::Status st = control_->GetStatus(&ctx, v1::GetStatusRequest(), &status);
  if (!st.ok()) return absl::UnavailableError("the agent's own GetStatus failed: " + st.error_message());
  return status;
}

std::string RankStatusLine(const v1::RankStatus& s) {
  std::string line = std::string("rank ") + RankStateName(s.state());
  if (s.rank() >= 0 && s.world_size() > 0) {
    line += " (rank " + std::to_string(s.rank()) + " of " + std::to_string(s.world_size()) + ", generation " +
            std::to_string(s.generation()) + ")";
  }
  if (!s.reason().empty()) line += ": " + s.reason();
  return line;
}

absl::StatusOr<int> AnnounceReadyAndWait(AgentSelfCheck& check, const std::string& status,
                                         const sigset_t& stop_signals) {
  // Generous: the first facts read walks sysfs (GID tables, NICs) on a busy node.
  if (absl::Status st = check.CheckFacts(std::chrono::seconds(30)); !st.ok()) return st;
  systemd::NotifyReady(status);
  std::string last_line;
  return systemd::WaitForSignalKeepingWatchdog(stop_signals, [&] {
    // A quarter of WatchdogSec at most: a slow answer still leaves time for the next check.
    const auto deadline = std::chrono::duration_cast<std::chrono::milliseconds>(*systemd::WatchdogPingInterval() / 2);
    absl::StatusOr<v1::RankStatus> s = check.CheckStatus(deadline);
    if (!s.ok()) {
      TLOG(WARN) << s.status().message() << ": no watchdog ping this time";
      return false;
    }
    const std::string line = status + "; " + RankStatusLine(*s);
    if (line != last_line) systemd::NotifyStatus(line);
    last_line = line;
    return true;
  });
}

}  // namespace tandem::agentd
