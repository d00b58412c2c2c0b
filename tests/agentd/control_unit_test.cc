// The pieces of orchestration that need no engine: the rendezvous store (blocking reads,
// bounds, old generations dropped, cancellation), the gRPC store client against an in-process
// AgentControl server (auth, missing keys, an unreachable head), the token helpers and the
// persisted assignment.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "agentd/assignment.h"
#include "agentd/auth.h"
#include "agentd/control_service.h"
#include "agentd/engine_host.h"
#include "agentd/grpc_store.h"
#include "agentd/model_roots.h"
#include "agentd/rendezvous_store.h"
#include "tests/agentd/temp_dir.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using tandem::testing::TempDir;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(RendezvousStoreTest, GetWaitsForTheKeyAndTimesOut) {
  RendezvousStore store;
  auto reader = std::async(std::launch::async, [&] { return store.Get("gen1/0", 5000ms); });
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(store.Set("gen1/0", "addr-of-rank-0").ok());
  auto v = reader.get();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "addr-of-rank-0");
  const auto t0 = Clock::now();
  auto missing = store.Get("gen1/1", 100ms);
  EXPECT_TRUE(absl::IsDeadlineExceeded(missing.status()));
  EXPECT_GE(Since(t0), 0.09);
  std::printf("missing key after %.3f s: %s\n", Since(t0), std::string(missing.status().message()).c_str());
}

TEST(RendezvousStoreTest, BoundedAndDropsOldGenerations) {
  RendezvousStore store(/*max_keys=*/4, /*max_bytes=*/64);
  ASSERT_TRUE(store.Set("gen1/a", "x").ok());
  ASSERT_TRUE(store.Set("gen2/a", "x").ok());
  ASSERT_TRUE(store.Set("gen10/a", "x").ok());
  ASSERT_TRUE(store.Set("group/generation", "10").ok());
  EXPECT_TRUE(absl::IsResourceExhausted(store.Set("gen10/b", "x")));  // 5th key
  EXPECT_TRUE(store.Set("gen10/a", "y").ok());                         // replacing is fine
  EXPECT_TRUE(absl::IsResourceExhausted(store.Set("gen10/a", std::string(100, 'z'))));
  store.DropGenerationsBefore(10);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_FALSE(store.TryGet("gen2/a").has_value());
  EXPECT_EQ(*store.TryGet("gen10/a"), "y");
  EXPECT_EQ(*store.TryGet("group/generation"), "10");
}

TEST(RendezvousStoreTest, CancelEndsAWaitWithinASlice) {
  RendezvousStore store;
  CancellableStore c(store, 50ms);
  auto reader = std::async(std::launch::async, [&] { return c.Get("never", 30000ms); });
  std::this_thread::sleep_for(100ms);
  const auto t0 = Clock::now();
  c.Cancel();
  ASSERT_EQ(reader.wait_for(2s), std::future_status::ready);
  EXPECT_TRUE(absl::IsCancelled(reader.get().status()));
  EXPECT_LT(Since(t0), 0.5);
  EXPECT_TRUE(absl::IsCancelled(c.Set("k", "v")));
}

TEST(AuthTest, ConstantTimeEqualsAndTokenFile) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  TempDir tmp;
  std::ofstream(tmp / "t") << "tok-0123456789abcdef \n\n";
  chmod((tmp / "t").c_str(), 0600);
  auto t = ReadTokenFile(tmp / "t");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "tok-0123456789abcdef");
  chmod((tmp / "t").c_str(), 0644);
  EXPECT_FALSE(ReadTokenFile(tmp / "t").ok()) << "a world-readable token file must be refused";
  std::ofstream(tmp / "short") << "x\n";
  chmod((tmp / "short").c_str(), 0600);
  EXPECT_FALSE(ReadTokenFile(tmp / "short").ok()) << "a 1-byte token must be refused";
  std::ofstream(tmp / "empty") << "\n";
  chmod((tmp / "empty").c_str(), 0600);
  EXPECT_FALSE(ReadTokenFile(tmp / "empty").ok());
  EXPECT_FALSE(ReadTokenFile(tmp / "missing").ok());
}

TEST(AssignmentTest, SaveLoadClear) {
  TempDir tmp;
  auto none = LoadAssignment(tmp.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  v1::PersistedAssignment a;
  a.set_model_path("/models/q");
  a.set_rank(1);
  a.set_world_size(2);
  a.set_generation(42);
  a.set_store_endpoint("10.0.0.1:50051");
  (*a.mutable_comm_env()->mutable_env())["NCCL_IB_HCA"] = "rocep1s0f0";
  ASSERT_TRUE(SaveAssignment(tmp.path(), a).ok());
  EXPECT_FALSE(std::filesystem::exists(AssignmentPath(tmp.path()) + ".tmp"));
  auto back = LoadAssignment(tmp.path());
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_TRUE((*back)->present());
  EXPECT_EQ((*back)->generation(), 42u);
  EXPECT_EQ((*back)->rank(), 1u);
  EXPECT_EQ((*back)->comm_env().env().at("NCCL_IB_HCA"), "rocep1s0f0");
  ASSERT_TRUE(ClearAssignment(tmp.path()).ok());
  EXPECT_FALSE(LoadAssignment(tmp.path())->has_value());
  std::ofstream(AssignmentPath(tmp.path())) << "{not json";
  EXPECT_FALSE(LoadAssignment(tmp.path()).ok());
}

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

TEST(EngineHostTest, StatesWithoutAModel) {
  RendezvousStore store;
  EngineHostOptions o;
  o.node_name = "unit";
  o.local_store = &store;
  EngineHost host(o);
  EXPECT_EQ(host.Status().state(), v1::RANK_STATE_IDLE);
  EXPECT_EQ(host.Status().rank(), -1);
  v1::JoinGroupRequest j;
  EXPECT_TRUE(absl::IsFailedPrecondition(host.JoinGroup(j).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(host.SetServing(true)));
  EXPECT_TRUE(absl::IsFailedPrecondition(host.Generate(v1::GenerateRequest{}).status()));
  EXPECT_TRUE(host.LeaveGroup(true, "").ok());
  // No model roots: every path is refused before anything is opened; the rank stays idle.
  v1::LoadModelRequest l;
  l.set_model_path("/nonexistent/model");
  int events = 0;
  const absl::Status refused = host.LoadModel(l, [&](const v1::LoadModelEvent&) { ++events; });
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_NE(refused.message().find("--model-root"), absl::string_view::npos) << refused;
  EXPECT_EQ(events, 0);
  EXPECT_EQ(host.Status().state(), v1::RANK_STATE_IDLE);
  // A thread count no machine has is refused before anything starts (it used to start them).
  l.set_threads(30000);
  const absl::Status too_many = host.LoadModel(l, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(too_many)) << too_many;
}

TEST(EngineHostTest, LoadModelIsConfinedToTheRoots) {
  TempDir tmp;
  std::filesystem::create_directories(tmp / "models/broken");
  std::ofstream(tmp / "models/broken/config.json") << "{ not json";
  auto roots = ModelRoots::Create({tmp / "models"});
  ASSERT_TRUE(roots.ok());
  RendezvousStore store;
  EngineHostOptions o;
  o.node_name = "unit";
  o.local_store = &store;
  o.model_roots = &*roots;
  EngineHost host(o);
  v1::LoadModelRequest l;
  l.set_model_path("/etc");
  absl::Status st = host.LoadModel(l, nullptr);
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  l.set_model_path(tmp / "models/missing");
  st = host.LoadModel(l, nullptr);
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  // Inside the roots the load runs, and its failure travels in the final event as before.
  l.set_model_path(tmp / "models/broken");
  v1::LoadModelEvent last;
  ASSERT_TRUE(host.LoadModel(l, [&](const v1::LoadModelEvent& e) { last = e; }).ok());
  EXPECT_TRUE(last.done());
  EXPECT_NE(last.error(), "");
  EXPECT_EQ(host.Status().state(), v1::RANK_STATE_FAILED);
  std::printf("load of a broken folder: %s\n", last.error().c_str());
}

}  // namespace
}  // namespace tandem::agentd

namespace tandem::agentd {
namespace {

// Found by the agent_rpc fuzz harness's review: JoinGroup.comm_env is set process-wide, so only
// the transport's variables are accepted; and a probe whose caller went away stops waiting.
TEST(EngineHostTest, CommEnvIsLimitedToTheTransportAndAProbeEndsWithItsCaller) {
  const std::string testdata = testing::CanonicalTestdataDir();
  auto roots = ModelRoots::Create({testdata});
  ASSERT_TRUE(roots.ok()) << roots.status();
  RendezvousStore store;
  EngineHostOptions o;
  o.node_name = "unit";
  o.local_store = &store;
  o.model_roots = &*roots;
  EngineHost host(o);
  v1::LoadModelRequest l;
  l.set_model_path(testdata + "/qwen3moe-tiny");
  l.set_backend("cpu");
  l.set_world_size(1);
  l.set_threads(1);
  ASSERT_TRUE(host.LoadModel(l, nullptr).ok());
  v1::JoinGroupRequest j;
  j.set_generation(1);
  j.set_world_size(1);
  j.set_api_listen("127.0.0.1:0");
  j.set_kv_tokens(4096);
  j.set_max_model_len(4096);
  for (const char* bad : {"LD_PRELOAD", "PATH", "NCCL_", "NCCL_ib_hca", "GLOOX"}) {
    (*j.mutable_comm_env()->mutable_env())[bad] = "/tmp/evil.so";
    auto r = host.JoinGroup(j);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad << ": " << r.status();
    EXPECT_NE(std::string(r.status().message()).find(bad), std::string::npos);
    j.mutable_comm_env()->clear_env();
  }
  EXPECT_EQ(std::getenv("LD_PRELOAD"), nullptr);
  (*j.mutable_comm_env()->mutable_env())["GLOO_SOCKET_IFNAME"] = "lo";
  auto joined = host.JoinGroup(j);
  ASSERT_TRUE(joined.ok() && joined->ok()) << joined.status();

  v1::GenerateRequest g;
  g.add_prompt_ids(1);
  g.set_max_tokens(4000);
  g.set_timeout_ms(60000);
  const auto t0 = std::chrono::steady_clock::now();
  auto gone = host.Generate(g, [] { return true; });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("probe whose caller went away: %s after %.3f s\n", gone.status().ToString().c_str(), s);
  EXPECT_TRUE(absl::IsCancelled(gone.status())) << gone.status();
  EXPECT_LT(s, 1.0);
  EXPECT_TRUE(host.LeaveGroup(true, "").ok());
}

}  // namespace
}  // namespace tandem::agentd
