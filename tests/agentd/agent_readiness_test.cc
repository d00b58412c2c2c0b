// What systemd hears from a real tandem-agentd (agentd/agent_readiness.h): READY=1 once its own
// gRPC server serves the facts (with the cluster token on), WATCHDOG=1 keep-alives while its
// GetStatus answers, STATUS= with the rank's state, and STOPPING=1 on SIGTERM. The status line
// of a rank is checked on its own.
#include "agentd/agent_readiness.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>

#include "tests/agentd/agent_process.h"
#include "tests/common/notify_socket.h"

namespace tandem::agentd {
namespace {

using std::chrono::milliseconds;
using tandem::testing::CountContaining;

TEST(AgentReadinessTest, AgentTellsSystemdWhenItServesAndKeepsTheWatchdogFed) {
  tandem::testing::TempDir dir;
  tandem::testing::FakeNotifySocket notify;
  tandem::testing::AgentProcess agent;
  agent.token = "0123456789abcdef-readiness";
  // WatchdogSec=400ms: a ping every 200 ms, so a few arrive within a second.
  agent.env = {{"NOTIFY_SOCKET", notify.path()}, {"WATCHDOG_USEC", "400000"}};
  ASSERT_EQ(agent.Start("ready-node", dir / "agent", tandem::testing::WriteTokenFile(dir / "token", agent.token)), "");
  const std::vector<std::string> ready = notify.WaitFor("READY=1", milliseconds(20000));
  ASSERT_FALSE(ready.empty()) << agent.log();
  std::printf("ready message: %s\n", ready.back().c_str());
  EXPECT_NE(ready.back().find("STATUS=serving gRPC on 127.0.0.1:" + std::to_string(agent.grpc_port)), std::string::npos);

  const std::vector<std::string> later = notify.Drain(milliseconds(1500));
  const int pings = CountContaining(later, "WATCHDOG=1");
  std::printf("%d watchdog pings in 1.5 s\n", pings);
  EXPECT_GE(pings, 3) << agent.log();
  EXPECT_EQ(CountContaining(later, "; rank idle"), 1) << "the status names the rank's state once";
  // A refused self-check would be logged; with the token passed along there is none.
  EXPECT_EQ(agent.log().find("no watchdog ping"), std::string::npos) << agent.log();

  agent.proc.Signal(SIGTERM);
  EXPECT_FALSE(notify.WaitFor("STOPPING=1", milliseconds(10000)).empty()) << agent.log();
  agent.proc.Stop();
}

TEST(AgentReadinessTest, RankStatusLineNamesStateGroupAndReason) {
  v1::RankStatus s;
  s.set_state(v1::RANK_STATE_IDLE);
  s.set_rank(-1);
  EXPECT_EQ(RankStatusLine(s), "rank idle");
  s.set_state(v1::RANK_STATE_LOADING);
  s.set_rank(1);
  s.set_world_size(2);
  s.set_generation(3);
  s.set_reason("40% of 16 GiB");
  EXPECT_EQ(RankStatusLine(s), "rank loading (rank 1 of 2, generation 3): 40% of 16 GiB");
}

}  // namespace
}  // namespace tandem::agentd
