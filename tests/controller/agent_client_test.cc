// The agent client against an address with nothing listening: a clear error, fast.
#include "controller/agent_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/status.h"
#include "tests/common/test_util.h"

namespace tandem::controller {
namespace {

using tandem::testing::UnusedLoopbackPort;

TEST(AgentClient, NothingListeningFailsWithinDeadline) {
  std::string address = "127.0.0.1:" + std::to_string(UnusedLoopbackPort());
  AgentClient client(address);
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::NodeFacts> facts = client.GetFacts("", std::chrono::milliseconds(5000));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(facts.ok());
  std::printf("  %s -> %s in %.3f s\n", address.c_str(), StatusText(facts.status()).c_str(), s);
  EXPECT_EQ(facts.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(s, 5.0);
}

TEST(AgentClient, ObserveNodesInParallelReportsEveryNode) {
  ClusterSpec spec;
  for (int i = 0; i < 3; ++i) {
    NodeSpec n;
    n.name = "n" + std::to_string(i);
    n.agent = "127.0.0.1:" + std::to_string(UnusedLoopbackPort());
    n.model_path = "/m";
    spec.nodes.push_back(n);
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<NodeObservation> obs = ObserveNodes(spec, ObserveOptions{});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(obs.size(), 3u);
  for (const auto& o : obs) EXPECT_FALSE(o.facts.ok());
  std::printf("  3 unreachable agents observed in %.3f s\n", s);
  EXPECT_LT(s, 5.0);
}

}  // namespace
}  // namespace tandem::controller
