// agentd/engine_host.h: the rank's state machine in-process (no agent process): refusals and
// their codes, model confinement, comm_env, a probe whose caller left, how a failed load or join
// and a busy rank are told apart from a refusal, and the KV cache dtype reaching the load.
#include "agentd/engine_host.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "agentd/auth.h"
#include "agentd/control_service.h"
#include "agentd/model_roots.h"
#include "agentd/rendezvous_store.h"
#include "tests/agentd/tiny_rank.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

using namespace std::chrono_literals;
using tandem::testing::TempDir;

EngineHostOptions UnitOptions(RendezvousStore* store, const ModelRoots* roots) {
  EngineHostOptions o;
  o.node_name = "unit";
  o.local_store = store;
  o.model_roots = roots;
  return o;
}

absl::StatusOr<ModelRoots> TestdataRoots() { return ModelRoots::Create({testing::CanonicalTestdataDir()}); }

TEST(EngineHostTest, StatesWithoutAModel) {
  RendezvousStore store;
  EngineHost host(UnitOptions(&store, nullptr));
  EXPECT_EQ(host.Status().state(), v1::RANK_STATE_IDLE);
  EXPECT_EQ(host.Status().rank(), -1);
  v1::JoinGroupRequest j;
  EXPECT_TRUE(absl::IsFailedPrecondition(host.JoinGroup(j).status()));
  EXPECT_FALSE(IsRankFailure(host.JoinGroup(j).status())) << "a refusal, not a failure";
  EXPECT_TRUE(absl::IsFailedPrecondition(host.SetServing(true)));
  EXPECT_TRUE(absl::IsFailedPrecondition(host.Generate(v1::GenerateRequest{}).status()));
  EXPECT_FALSE(IsProbeFailure(host.Generate(v1::GenerateRequest{}).status())) << "a refusal: nothing ran";
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
  EngineHost host(UnitOptions(&store, &*roots));
  v1::LoadModelRequest l;
  l.set_model_path("/etc");
  absl::Status st = host.LoadModel(l, nullptr);
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  l.set_model_path(tmp / "models/missing");
  st = host.LoadModel(l, nullptr);
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_FALSE(IsRankFailure(st)) << "refused before anything was opened";
  // Inside the roots the load runs; its failure is the status, marked as the rank's, with no
  // final event.
  l.set_model_path(tmp / "models/broken");
  bool final_event = false;
  st = host.LoadModel(l, [&](const v1::LoadModelEvent& e) { final_event = final_event || e.done(); });
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(IsRankFailure(st)) << st;
  EXPECT_FALSE(final_event);
  EXPECT_EQ(host.Status().state(), v1::RANK_STATE_FAILED);
  EXPECT_EQ(host.Status().reason(), "load failed: " + std::string(st.message()));
  std::printf("load of a broken folder: %s\n", st.ToString().c_str());
}

// Found by the agent_rpc fuzz harness's review: JoinGroup.comm_env is set process-wide, so only
// the transport's variables are accepted; and a probe whose caller went away stops waiting.
TEST(EngineHostTest, CommEnvIsLimitedToTheTransportAndAProbeEndsWithItsCaller) {
  auto roots = TestdataRoots();
  ASSERT_TRUE(roots.ok()) << roots.status();
  RendezvousStore store;
  EngineHost host(UnitOptions(&store, &*roots));
  ASSERT_TRUE(host.LoadModel(TinyLoad(0, 1), nullptr).ok());
  v1::JoinGroupRequest j = SoloJoin(1);
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
  ASSERT_TRUE(joined.ok()) << joined.status();

  v1::GenerateRequest g;
  g.add_prompt_ids(1);
  g.set_max_tokens(4000);
  g.set_timeout_ms(60000);
  const auto t0 = std::chrono::steady_clock::now();
  auto gone = host.Generate(g, [] { return true; });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("probe whose caller went away: %s after %.3f s\n", gone.status().ToString().c_str(), s);
  EXPECT_TRUE(absl::IsCancelled(gone.status())) << gone.status();
  EXPECT_TRUE(IsProbeFailure(gone.status())) << "the engine took the probe";
  EXPECT_LT(s, 1.0);
  EXPECT_TRUE(host.LeaveGroup(true, "").ok());
}

// The request's kv_cache_dtype reaches the engine's load: fp8 loads, a value the engine does not
// know fails the load naming it (a failure of the rank: the load ran).
TEST(EngineHostTest, KvCacheDtypeReachesTheModelLoad) {
  auto roots = TestdataRoots();
  ASSERT_TRUE(roots.ok()) << roots.status();
  RendezvousStore store;
  EngineHost host(UnitOptions(&store, &*roots));
  v1::LoadModelRequest l = TinyLoad(0, 1);
  l.set_kv_cache_dtype("fp16");
  const absl::Status bad = host.LoadModel(l, nullptr);
  EXPECT_TRUE(IsRankFailure(bad)) << bad;
  EXPECT_NE(bad.message().find("kv cache dtype must be auto, f32, bf16 or fp8, not \"fp16\""),
            absl::string_view::npos)
      << bad;
  l.set_kv_cache_dtype("fp8");
  const absl::Status ok = host.LoadModel(l, nullptr);
  EXPECT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(host.Status().state(), v1::RANK_STATE_LOADED);
}

// A worker rank whose join waits in the rendezvous holds the rank: a load meanwhile is told to
// retry (UNAVAILABLE, not FAILED_PRECONDITION); the leave calls the join off, and the join's
// end is a failure of the rank (marked).
TEST(EngineHostTest, ABusyRankAnswersUnavailableAndACalledOffJoinIsARankFailure) {
  auto roots = TestdataRoots();
  ASSERT_TRUE(roots.ok()) << roots.status();
  RendezvousStore store;
  EngineHostOptions o = UnitOptions(&store, &*roots);
  o.peer_heartbeat = 0ms;
  EngineHost host(o);
  const v1::LoadModelRequest l = TinyLoad(1, 2);
  ASSERT_TRUE(host.LoadModel(l, nullptr).ok());
  v1::JoinGroupRequest j;
  j.set_generation(3);
  j.set_rank(1);
  j.set_world_size(2);
  // The head's store (served in-process), where the head never arrives.
  RendezvousStore head_store;
  TokenAuth no_auth;
  ControlService head_service(&host, &head_store, &no_auth);  // only its Store* calls are made
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&head_service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_GT(port, 0);
  j.set_store_endpoint("127.0.0.1:" + std::to_string(port));
  j.set_comm_host("127.0.0.1");
  j.set_timeout_ms(60000);
  auto join = std::async(std::launch::async, [&] { return host.JoinGroup(j); });
  for (uint64_t seen = 0; host.Status().state() != v1::RANK_STATE_JOINING;) seen = host.WaitForChange(seen, 1000ms);
  const absl::Status busy = host.LoadModel(l, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(busy)) << busy;
  EXPECT_EQ(busy.message(), "another load, join or leave is in progress");
  EXPECT_FALSE(IsRankFailure(busy));
  // A probe while the join runs: the join ends by itself, so a retry works (UNAVAILABLE); a loaded
  // rank outside any group needs the operator (FAILED_PRECONDITION, StatesWithoutAModel).
  const absl::Status probe = host.Generate(v1::GenerateRequest{}).status();
  EXPECT_TRUE(absl::IsUnavailable(probe)) << probe;
  EXPECT_FALSE(IsProbeFailure(probe)) << "a refusal: nothing ran";
  EXPECT_TRUE(host.LeaveGroup(false, "test").ok());
  auto joined = join.get();
  ASSERT_FALSE(joined.ok());
  EXPECT_TRUE(IsRankFailure(joined.status())) << joined.status();
  EXPECT_TRUE(absl::IsCancelled(joined.status())) << "the code of what ended it";
  std::printf("join called off: %s\n", joined.status().ToString().c_str());
  EXPECT_EQ(joined.status().message().rfind("join of generation 3 failed: ", 0), 0u) << joined.status();
  server->Shutdown(std::chrono::system_clock::now() + 1s);
}

}  // namespace
}  // namespace tandem::agentd
