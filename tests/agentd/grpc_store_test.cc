// agentd/grpc_store.h: the store client against an in-process AgentControl server (auth,
// missing keys, a wait spanning slices) and against an address nobody listens on.
#include "agentd/grpc_store.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "agentd/auth.h"
#include "agentd/control_service.h"
#include "agentd/engine_host.h"
#include "agentd/rendezvous_store.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// An in-process AgentControl server with the token "t0k".
class GrpcStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineHostOptions o;
    o.node_name = "unit";
    o.local_store = &store_;
    host_ = std::make_unique<EngineHost>(o);
    service_ = std::make_unique<ControlService>(host_.get(), &store_, &auth_);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
    host_->Shutdown();
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  RendezvousStore store_;
  TokenAuth auth_{"t0k"};
  std::unique_ptr<EngineHost> host_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(GrpcStoreTest, SetGetProbeThroughTheHead) {
  GrpcStore remote(endpoint(), "t0k", nullptr, 200ms);
  ASSERT_TRUE(remote.Set("gen3/0", "rank0-addr").ok());
  EXPECT_EQ(*store_.TryGet("gen3/0"), "rank0-addr");
  auto later = std::async(std::launch::async, [&] { return remote.Get("gen3/1", 5000ms); });
  std::this_thread::sleep_for(300ms);  // spans more than one slice
  ASSERT_TRUE(store_.Set("gen3/1", "rank1-addr").ok());
  auto v = later.get();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "rank1-addr");

  const auto t0 = Clock::now();
  auto missing = remote.Get("gen3/9", 500ms);
  EXPECT_TRUE(absl::IsDeadlineExceeded(missing.status())) << missing.status();
  EXPECT_LT(Since(t0), 2.0);
  auto probe = remote.Probe("gen3/9", 1000ms);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_FALSE(probe->has_value());
  probe = remote.Probe("gen3/0", 1000ms);
  ASSERT_TRUE(probe.ok() && probe->has_value());

  GrpcStore wrong(endpoint(), "nope", nullptr, 200ms);
  EXPECT_TRUE(absl::IsUnauthenticated(wrong.Set("k", "v"))) << wrong.Set("k", "v");
  EXPECT_TRUE(absl::IsUnauthenticated(wrong.Probe("k", 1000ms).status()));
}

TEST(GrpcStoreUnreachableTest, ProbeFailsWithinItsDeadline) {
  // A port nobody listens on (bound then closed).
  int port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  GrpcStore remote("127.0.0.1:" + std::to_string(port), "", nullptr, 200ms);
  const auto t0 = Clock::now();
  auto probe = remote.Probe("group/generation", 500ms);
  EXPECT_FALSE(probe.ok());
  EXPECT_LT(Since(t0), 1.5);
  auto get = remote.Get("gen1/0", 600ms);
  EXPECT_TRUE(absl::IsDeadlineExceeded(get.status())) << get.status();
  EXPECT_LT(Since(t0), 4.0);
  std::printf("unreachable head: probe %s; get %s\n", std::string(probe.status().message()).c_str(),
              std::string(get.status().message()).c_str());
}

}  // namespace
}  // namespace tandem::agentd
