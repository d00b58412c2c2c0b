// The real tandem-agentd binary on fake roots: ready line, GetFacts over gRPC, /metrics over
// HTTP, clean exit on SIGTERM.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <thread>

#include "common/subprocess.h"
#include "tandem/v1/agent.grpc.pb.h"
#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
using tandem::testing::FakeNodeOptions;
using tandem::testing::TempDir;
using tandem::testing::WriteFakeNode;

// The build passes the binary's path; TANDEM_AGENTD overrides it (e.g. an installed binary).
std::string AgentBinary() {
  if (const char* p = std::getenv("TANDEM_AGENTD")) return p;
  return TANDEM_AGENTD_BINARY;
}

struct ReadyLine {
  std::string node, grpc_host, metrics_host;
  int grpc_port = 0, metrics_port = 0;
};

// Waits for the ready line in the child's stdout file.
bool WaitForReady(Subprocess* p, const std::string& stdout_path, ReadyLine* out, std::chrono::seconds deadline) {
  static const std::regex kReady(
      R"(tandem-agentd ready node=(\S+) grpc=(\S+):(\d+) metrics=(\S+):(\d+))");
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    std::smatch m;
    const std::string text = tandem::testing::ReadTextFile(stdout_path);
    if (std::regex_search(text, m, kReady)) {
      *out = ReadyLine{m[1], m[2], m[4], std::stoi(m[3]), std::stoi(m[5])};
      return true;
    }
    if (!p->running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(AgentdProcessTest, ServesFactsAndMetricsAndStopsOnSigterm) {
  TempDir tmp;
  FakeNodeOptions opts;
  opts.driver_version = "580.99.01";  // distinct from any real driver
  auto [sys, proc] = WriteFakeNode(tmp / "node", opts);
  // Byte counters of one CX-7 half, for the link-utilisation series the agent samples.
  tandem::testing::WriteTextFile(sys + "/class/net/enp1s0f0np0/statistics/tx_bytes", "123456\n");
  tandem::testing::WriteTextFile(sys + "/class/net/enp1s0f0np0/statistics/rx_bytes", "654321\n");
  Subprocess agent;
  SubprocessOptions so;
  so.argv = {AgentBinary(),      "--listen",     "127.0.0.1:0", "--node-name",     "spark-b",
             "--sysfs-root",     sys,            "--procfs-root", proc,            "--state-dir",
             tmp / "state",      "--metrics-listen", "127.0.0.1:0"};
  so.env = {{"TANDEM_IMAGE_DIGEST", "sha256:feedface"}};
  so.stdout_path = tmp / "stdout";
  so.stderr_path = tmp / "stderr";
  std::string err;
  ASSERT_TRUE(agent.Start(so, &err)) << err;
  const auto t0 = std::chrono::steady_clock::now();
  ReadyLine ready;
  ASSERT_TRUE(WaitForReady(&agent, so.stdout_path, &ready, std::chrono::seconds(15)))
      << "stdout: " << tandem::testing::ReadTextFile(so.stdout_path) << "\nstderr: " << tandem::testing::ReadTextFile(so.stderr_path);
  std::cout << "ready after "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s: grpc port "
            << ready.grpc_port << ", metrics port " << ready.metrics_port << "\n";
  EXPECT_EQ(ready.node, "spark-b");
  EXPECT_GT(ready.grpc_port, 0);
  EXPECT_GT(ready.metrics_port, 0);

  auto stub = v1::Agent::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(ready.grpc_port),
                                                     grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::NodeFacts facts;
  grpc::Status st = stub->GetFacts(&ctx, v1::GetFactsRequest{}, &facts);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(facts.node_name(), "spark-b");
  EXPECT_EQ(facts.driver().version(), "580.99.01");
  EXPECT_EQ(facts.build().image_digest(), "sha256:feedface");
  EXPECT_EQ(facts.build().binary_path(), std::filesystem::canonical(AgentBinary()).string());
  EXPECT_EQ(facts.build().binary_sha256().size(), 64u);

  httplib::Client http("127.0.0.1", ready.metrics_port);
  http.set_connection_timeout(5);
  http.set_read_timeout(5);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "metrics scrape failed";
  ASSERT_EQ(res->status, 200);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(res->body, m, std::regex(R"(tandem_node_info\{[^}]*\} 1)"))) << res->body;
  std::cout << "scraped: " << m[0] << "\n";
  const std::string info = m[0];
  EXPECT_NE(info.find("driver=\"580.99.01\""), std::string::npos);
  EXPECT_NE(info.find("node=\"spark-b\""), std::string::npos);
  EXPECT_NE(info.find("agent_sha256=\"" + facts.build().binary_sha256() + "\""), std::string::npos);
  EXPECT_NE(res->body.find("tandem_link_tx_bytes_total{node=\"spark-b\",interface=\"enp1s0f0np0\"} 123456"),
            std::string::npos)
      << res->body;

  // Facts are fresh: change the driver file, scrape again.
  tandem::testing::WriteTextFile(sys + "/module/nvidia/version", "580.99.02\n");
  auto res2 = http.Get("/metrics");
  ASSERT_TRUE(res2);
  EXPECT_NE(res2->body.find("driver=\"580.99.02\""), std::string::npos);

  const auto stop_start = std::chrono::steady_clock::now();
  agent.Signal(SIGTERM);
  auto status = agent.Wait(std::chrono::milliseconds(10000));
  std::cout << "stopped "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_start).count()
            << " s after SIGTERM; agent log:\n"
            << tandem::testing::ReadTextFile(so.stderr_path);
  ASSERT_TRUE(status.has_value()) << "agent did not stop within 10 s of SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
}

// Issue 12: an agent started with default flags listened on 0.0.0.0:50051 without auth. Now a
// network address without authentication is refused unless --insecure, which is reported.
TEST(AgentdProcessTest, RefusesTheNetworkWithoutAuthenticationUnlessInsecure) {
  TempDir tmp;
  {
    Subprocess agent;
    SubprocessOptions so;
    so.argv = {AgentBinary(), "--listen", "0.0.0.0:0", "--node-name", "open"};
    so.stdout_path = tmp / "refused.out";
    so.stderr_path = tmp / "refused.err";
    std::string err;
    ASSERT_TRUE(agent.Start(so, &err)) << err;
    auto status = agent.Wait(std::chrono::milliseconds(5000));
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << DescribeWaitStatus(*status);
    const std::string log = tandem::testing::ReadTextFile(tmp / "refused.err");
    std::cout << "no auth on 0.0.0.0: " << log;
    EXPECT_NE(log.find("refusing to listen on 0.0.0.0:0 without authentication"), std::string::npos) << log;
    EXPECT_EQ(tandem::testing::ReadTextFile(tmp / "refused.out").find("ready"), std::string::npos);
  }
  Subprocess agent;
  SubprocessOptions so;
  so.argv = {AgentBinary(), "--listen", "0.0.0.0:0", "--node-name", "open", "--insecure", "--metrics-listen", "127.0.0.1:0"};
  so.stdout_path = tmp / "insecure.out";
  so.stderr_path = tmp / "insecure.err";
  std::string err;
  ASSERT_TRUE(agent.Start(so, &err)) << err;
  ReadyLine ready;
  ASSERT_TRUE(WaitForReady(&agent, so.stdout_path, &ready, std::chrono::seconds(15))) << tandem::testing::ReadTextFile(so.stderr_path);
  EXPECT_NE(tandem::testing::ReadTextFile(so.stderr_path).find("INSECURE"), std::string::npos) << "--insecure is logged loudly";
  auto stub = v1::Agent::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(ready.grpc_port),
                                                     grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetFactsRequest req;
  req.set_model_path("/etc");
  v1::NodeFacts facts;
  ASSERT_TRUE(stub->GetFacts(&ctx, req, &facts).ok());
  std::cout << "security: " << facts.security().ShortDebugString() << "\nmodel: " << facts.model().ShortDebugString()
            << "\n";
  EXPECT_TRUE(facts.security().insecure());
  EXPECT_FALSE(facts.security().token_auth());
  EXPECT_FALSE(facts.security().loopback_only());
  EXPECT_NE(facts.model().error().find("--model-root"), std::string::npos) << "no roots: every path refused";
  agent.Signal(SIGTERM);
  ASSERT_TRUE(agent.Wait(std::chrono::milliseconds(10000)).has_value());
}

}  // namespace
}  // namespace tandem::agentd
