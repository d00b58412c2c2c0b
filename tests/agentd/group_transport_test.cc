// The pure parts of agentd/group_transport.h: the head's heartbeat watch over its workers, the
// heartbeat keys, and what a cuda rank says where it cannot run (no CUDA in the build, or no GPU).
#include "agentd/group_transport.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "agentd/group_comm.h"

namespace tandem::agentd {
namespace {

using namespace std::chrono_literals;
using Clock = PeerWatch::Clock;

TEST(PeerWatch, AliveWhileTheCounterMovesLostWhenItStops) {
  const Clock::time_point t0 = Clock::now();
  PeerWatch w(3, 3000ms, t0);
  EXPECT_FALSE(w.Lost(t0 + 2900ms).has_value());  // no heartbeat yet, but within the grace period
  w.Observe(1, "1", t0 + 500ms);
  w.Observe(2, "1", t0 + 500ms);
  w.Observe(1, "2", t0 + 1000ms);
  w.Observe(2, "1", t0 + 1000ms);  // rank 2 stopped after its first beat
  EXPECT_FALSE(w.Lost(t0 + 3400ms).has_value());
  auto lost = w.Lost(t0 + 3500ms);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->first, 2);
  EXPECT_EQ(lost->second, 3000ms);
  // A missing key counts as silence; rank 0 (the head itself) and out-of-range ranks are ignored.
  PeerWatch never(2, 1000ms, t0);
  never.Observe(1, std::nullopt, t0 + 900ms);
  never.Observe(0, "x", t0 + 900ms);
  never.Observe(7, "x", t0 + 900ms);
  ASSERT_TRUE(never.Lost(t0 + 1000ms).has_value());
  EXPECT_EQ(never.Lost(t0 + 1000ms)->first, 1);
  // lost_after 0 turns the watch off.
  PeerWatch off(2, 0ms, t0);
  EXPECT_FALSE(off.Lost(t0 + 1h).has_value());
}

TEST(GroupTransport, HeartbeatKeyIsUnderTheGenerationPrefix) {
  EXPECT_EQ(HeartbeatKey(7, 1), "gen7/alive/1");
}

TEST(GroupTransport, CpuRanksNeedNoDevice) {
  auto d = PrepareRankDevice("cpu");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, "");
}

TEST(GroupTransport, CudaRankWithoutCudaSaysWhy) {
  // This machine has no GPU (the CPU CI): the text names either the build or the visible devices.
  setenv("CUDA_VISIBLE_DEVICES", "", 1);  // hide every GPU, even on a GPU machine
  auto d = PrepareRankDevice("cuda");
  unsetenv("CUDA_VISIBLE_DEVICES");
  if (d.ok()) GTEST_SKIP() << "a CUDA device is visible: " << *d;
  std::printf("  %s\n", std::string(d.status().message()).c_str());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  if (BuildHasCuda()) {
    EXPECT_TRUE(absl::StrContains(d.status().message(), "no CUDA device visible (CUDA_VISIBLE_DEVICES=)"))
        << d.status();
  } else {
    EXPECT_TRUE(absl::StrContains(d.status().message(), "this build has no CUDA")) << d.status();
  }
  GroupCommOptions o;
  o.backend = "cuda";
  o.world_size = 2;
  if (!BuildHasCuda()) {
    auto c = CreateGroupComm(o);
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(absl::StrContains(c.status().message(), "this build has no CUDA")) << c.status();
  }
}

TEST(GroupTransport, StandInWithoutAGroupFails) {
  GroupComm g(1, 2);
  float x = 1;
  EXPECT_EQ(g.AllReduceSum(&x, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(g.aborted());
  EXPECT_EQ(g.transport(), "none");
}

}  // namespace
}  // namespace tandem::agentd
