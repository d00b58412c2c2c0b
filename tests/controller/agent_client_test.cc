// The agent client against an address with nothing listening: a clear error, fast.
#include "controller/agent_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/status.h"

namespace tandem::controller {
namespace {

int UnusedLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

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
