// agentd/engine_teardown.cc: EngineHost when a teardown gets stuck (failpoint engine_shutdown_hang): the API port is free
// at once, the rank reports what it did, and a later load and join of the same API port work
// while the stuck group is still alive — its model stays alive for it (shared, not freed by the
// reload). In-process, world of one, qwen3moe-tiny; on_stuck unset (report only).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "agentd/engine_host.h"
#include "agentd/model_roots.h"
#include "agentd/rendezvous_store.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;

// Before any failpoint is read: the list is read once per process (this binary holds only this test).
const bool kFailpointOn = setenv("TANDEM_FAILPOINTS", "engine_shutdown_hang", 1) == 0;

bool Connects(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

void LoadAndJoin(EngineHost& host, uint64_t generation, int api_port) {
  v1::LoadModelRequest l;
  l.set_model_path(testing::CanonicalTestdataDir() + "/qwen3moe-tiny");
  l.set_backend("cpu");
  l.set_world_size(1);
  l.set_threads(1);
  v1::LoadModelEvent last;
  ASSERT_TRUE(host.LoadModel(l, [&](const v1::LoadModelEvent& e) { last = e; }).ok());
  ASSERT_TRUE(last.done());
  v1::JoinGroupRequest j;
  j.set_generation(generation);
  j.set_world_size(1);
  j.set_api_listen("127.0.0.1:" + std::to_string(api_port));
  j.set_kv_tokens(256);
  j.set_max_num_seqs(2);
  auto r = host.JoinGroup(j);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(Connects(api_port));
}

TEST(EngineTeardownTest, StuckTeardownFreesThePortAndALaterGroupStarts) {
  ASSERT_TRUE(kFailpointOn);
  auto roots = ModelRoots::Create({testing::CanonicalTestdataDir()});
  ASSERT_TRUE(roots.ok()) << roots.status();
  RendezvousStore store;
  EngineHostOptions o;
  o.node_name = "stuck";
  o.local_store = &store;
  o.model_roots = &*roots;
  o.leave_deadline = std::chrono::milliseconds(500);
  EngineHost host(o);
  const int api_port = testing::UnusedLoopbackPort();
  LoadAndJoin(host, 1, api_port);

  const auto t0 = Clock::now();
  const absl::Status left = host.LeaveGroup(true, "test");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("leave with a stuck engine shutdown: %.2f s: %s\n", seconds, std::string(left.message()).c_str());
  EXPECT_TRUE(absl::IsAborted(left)) << left;
  EXPECT_TRUE(IsRankFailure(left)) << "the leave ran and left the rank failed";
  EXPECT_NE(left.message().find("API port released"), absl::string_view::npos);
  EXPECT_NE(left.message().find("restart the agent"), absl::string_view::npos) << "on_stuck unset: report only";
  EXPECT_LT(seconds, 5.0);  // 0.5 s graceful + 3 s after the abort
  EXPECT_EQ(host.Status().state(), v1::RANK_STATE_FAILED);
  EXPECT_FALSE(Connects(api_port)) << "the stuck group still holds the API port";

  // A new group on the same port, while the old one's shutdown thread is still stuck.
  LoadAndJoin(host, 2, api_port);
  EXPECT_EQ(host.Status().state(), v1::RANK_STATE_READY);
  // The process ends with the stuck thread still running: the test does not wait for it.
  std::fflush(nullptr);
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
}

}  // namespace
}  // namespace tandem::agentd
