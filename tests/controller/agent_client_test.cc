// The agent client against an address with nothing listening (a clear error, fast) and against
// an agent that fails a hash as a whole (its code and words come back).
#include "controller/agent_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/status.h"
#include "tests/common/loopback_server.h"
#include "tests/common/test_util.h"

namespace tandem::controller {
namespace {

using tandem::testing::LoopbackServer;
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

// An agent whose HashWeights streams one progress event and then ends with a scripted status.
class ScriptedAgent final : public v1::Agent::Service {
 public:
  explicit ScriptedAgent(grpc::Status answer) : answer_(std::move(answer)) {}
  grpc::Status HashWeights(grpc::ServerContext*, const v1::HashWeightsRequest*,
                           grpc::ServerWriter<v1::HashWeightsEvent>* writer) override {
    v1::HashWeightsEvent ev;
    ev.mutable_progress()->set_files_total(2);
    writer->Write(ev);
    return answer_;
  }

 private:
  const grpc::Status answer_;
};

// preflight shows it as "hashing failed: HashWeights: <the agent's words>".
TEST(AgentClient, HashWeightsThatFailedKeepsTheAgentsCode) {
  for (const grpc::StatusCode code :
       {grpc::StatusCode::NOT_FOUND, grpc::StatusCode::PERMISSION_DENIED, grpc::StatusCode::INVALID_ARGUMENT}) {
    ScriptedAgent agent(grpc::Status(code, "model folder /models/q: No such file or directory"));
    LoopbackServer server(&agent);
    ASSERT_GT(server.port(), 0);
    AgentClient client(server.address());
    int progress = 0;
    absl::StatusOr<v1::WeightsManifest> m =
        client.HashWeights("/models/q", std::chrono::milliseconds(5000), [&](const v1::HashProgress&) { ++progress; });
    EXPECT_EQ(m.status().code(), static_cast<absl::StatusCode>(code)) << m.status();
    EXPECT_EQ(m.status().message(), "HashWeights: model folder /models/q: No such file or directory");
    EXPECT_EQ(progress, 1) << "the progress before the failure still reaches the caller";
  }
}

}  // namespace
}  // namespace tandem::controller
