// Load progress (engine/model/load_progress.h): the checkpoint sets the totals and counts each
// tensor once however often it is read, a cpu load of qwen3moe-tiny reads every tensor, the text
// says how far, and the log thread prints a line per 10% passed and a final "loaded" (and under
// systemd makes each line the unit's STATUS=).
#include "engine/model/load_progress.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/model/checkpoint.h"
#include "tests/common/notify_socket.h"
#include "tests/common/test_util.h"

namespace tandem::engine {
namespace {

std::string Tiny() { return tandem::testing::TestdataDir() + "/qwen3moe-tiny"; }

TEST(LoadProgressTest, TheCheckpointCountsEachTensorOnce) {
  LoadProgress p;
  EXPECT_EQ(DescribeLoadProgress(p), "opening the checkpoint");
  auto ckpt = Checkpoint::Open(Tiny(), &p);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(p.tensors_total.load(), static_cast<int64_t>((*ckpt)->Names().size()));
  EXPECT_GT(p.bytes_total.load(), 0);
  EXPECT_EQ(p.tensors_read.load(), 0);
  const std::string name = (*ckpt)->Names().front();
  auto shape = (*ckpt)->Shape(name);
  ASSERT_TRUE(shape.ok());
  ASSERT_TRUE((*ckpt)->Read(name, *shape).ok());
  const int64_t once = p.bytes_read.load();
  EXPECT_GT(once, 0);
  ASSERT_TRUE((*ckpt)->Read(name, *shape).ok());
  EXPECT_EQ(p.tensors_read.load(), 1) << "a tensor read twice counts once";
  EXPECT_EQ(p.bytes_read.load(), 2 * once) << "its bytes count each time";
}

TEST(LoadProgressTest, ACpuLoadReadsEveryTensor) {
  LoadProgress p;
  ModelLoadOptions lo;
  lo.progress = &p;
  lo.threads = 1;
  auto model = Model::Load(Tiny(), lo);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(p.tensors_read.load(), p.tensors_total.load());
  const std::string text = DescribeLoadProgress(p);
  EXPECT_EQ(text.rfind("100% (", 0), 0u) << text;
  std::cout << text << "\n";
}

TEST(LoadProgressTest, TheLogSaysEachTenPercentAndTheEnd) {
  LoadProgress p;
  p.tensors_total = 10;
  ::testing::internal::CaptureStderr();
  {
    LoadProgressLog log("m", &p, std::chrono::hours(1));  // no timed lines: only the 10% steps
    for (int i = 1; i <= 3; ++i) {
      p.tensors_read = i;
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    }
    log.Done();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::cout << err;
  EXPECT_NE(err.find("loading m: 10% (1/10 tensors"), std::string::npos) << err;
  EXPECT_NE(err.find("loading m: 30% (3/10 tensors"), std::string::npos) << err;
  EXPECT_NE(err.find("loaded m in "), std::string::npos) << err;
}

// Under systemd each progress line is also the unit's STATUS=; while bytes arrive it pushes the
// start timeout out (EXTEND_TIMEOUT_USEC, three log periods), a stalled load does not.
TEST(LoadProgressTest, ProgressLinesBecomeTheUnitsStatusAndExtendTheStartWhileMoving) {
  tandem::testing::FakeNotifySocket notify;
  setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
  LoadProgress p;
  p.tensors_total = 10;
  p.bytes_total = 10 << 20;
  {
    LoadProgressLog log("rank 1", &p, std::chrono::milliseconds(100));
    p.tensors_read = 4;
    p.bytes_read = 4 << 20;
    const std::vector<std::string> moving = notify.WaitFor("STATUS=loading rank 1: 40%", std::chrono::seconds(5));
    ASSERT_FALSE(moving.empty());
    std::printf("%s\n", moving.back().c_str());
    EXPECT_NE(moving.back().find("\nEXTEND_TIMEOUT_USEC=300000"), std::string::npos) << moving.back();
    // Nothing moves now: the next timed lines only say where it stands.
    std::vector<std::string> stalled = notify.Drain(std::chrono::milliseconds(450));
    ASSERT_GE(stalled.size(), 2u);
    EXPECT_EQ(stalled.back().find("EXTEND_TIMEOUT_USEC"), std::string::npos) << stalled.back();
    EXPECT_EQ(stalled.back().rfind("STATUS=loading rank 1: 40%", 0), 0u) << stalled.back();
  }
  unsetenv("NOTIFY_SOCKET");
}

}  // namespace
}  // namespace tandem::engine
