// agentd/grpc_store.h: the store client against an in-process AgentControl server (auth,
// missing keys, a wait spanning slices), a head that answers with a scripted code, and an
// address nobody listens on.
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
#include "tests/common/loopback_server.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using tandem::testing::LoopbackServer;
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
    server_ = std::make_unique<LoopbackServer>(service_.get());
    ASSERT_GT(server_->port(), 0);
  }
  void TearDown() override {
    server_.reset();
    host_->Shutdown();
  }
  std::string endpoint() const { return server_->address(); }

  RendezvousStore store_;
  TokenAuth auth_{"t0k"};
  std::unique_ptr<EngineHost> host_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<LoopbackServer> server_;
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

// A key that did not appear within the wait is NOT_FOUND on the wire: Get and Probe read the code
// (a DEADLINE_EXCEEDED is their own call's deadline), never the message.
TEST_F(GrpcStoreTest, MissingKeyIsNotFoundOnTheWire) {
  auto stub = v1::AgentControl::NewStub(grpc::CreateChannel(endpoint(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  TokenAuth::AddTo(&ctx, "t0k");
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::StoreGetRequest req;
  req.set_key("gen3/9");
  req.set_timeout_ms(50);
  v1::StoreGetResponse resp;
  const grpc::Status st = stub->StoreGet(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_NE(st.error_message().find("'gen3/9' did not appear"), std::string::npos) << st.error_message();
}

// A head whose store answers every call with one scripted status.
class ScriptedHead final : public v1::AgentControl::Service {
 public:
  explicit ScriptedHead(grpc::Status answer) : answer_(std::move(answer)) {}
  grpc::Status StoreSet(grpc::ServerContext*, const v1::StoreSetRequest*, v1::StoreSetResponse*) override {
    return answer_;
  }
  grpc::Status StoreGet(grpc::ServerContext*, const v1::StoreGetRequest*, v1::StoreGetResponse*) override {
    return answer_;
  }

 private:
  const grpc::Status answer_;
};

// What the head answers comes back with its own code (a FAILED_PRECONDITION or PERMISSION_DENIED
// once became UNKNOWN on the way), and the message names the key and the store.
TEST(GrpcStoreCodesTest, TheHeadsCodeComesBackUnchanged) {
  for (const grpc::StatusCode code : {grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::PERMISSION_DENIED,
                                      grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::INTERNAL}) {
    ScriptedHead head(grpc::Status(code, "scripted answer"));
    LoopbackServer server(&head);
    ASSERT_GT(server.port(), 0);
    GrpcStore remote(server.address(), "", nullptr, 200ms);
    const auto want = static_cast<absl::StatusCode>(code);
    const absl::Status set = remote.Set("gen1/0", "addr");
    EXPECT_EQ(set.code(), want) << set;
    EXPECT_EQ(set.message(), "setting 'gen1/0' in the store at " + server.address() + ": scripted answer");
    EXPECT_EQ(remote.SetOnce("gen1/0", "addr", 1000ms).code(), want);
    const absl::StatusOr<std::string> get = remote.Get("gen1/1", 1000ms);
    EXPECT_EQ(get.status().code(), want) << get.status();
    EXPECT_NE(get.status().message().find("reading 'gen1/1'"), std::string::npos) << get.status();
    EXPECT_EQ(remote.Probe("gen1/1", 1000ms).status().code(), want);
  }
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
