// The sd_notify helpers against a fake NOTIFY_SOCKET: the exact messages systemd would read,
// the watchdog interval taken from WATCHDOG_USEC (and refused for another process's
// WATCHDOG_PID), the kicker's rate limit, and the signal wait that pings only while its
// liveness check passes.
#include "common/systemd_notify.h"

#include <pthread.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/notify_socket.h"

namespace tandem::systemd {
namespace {

using std::chrono::milliseconds;
using tandem::testing::CountContaining;
using tandem::testing::FakeNotifySocket;

// The environment systemd gives a Type=notify unit with WatchdogSec, restored afterwards.
class SystemdNotifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NOTIFY_SOCKET", socket_.path().c_str(), 1);
    setenv("WATCHDOG_USEC", "200000", 1);
    setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  }
  void TearDown() override {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
  }
  FakeNotifySocket socket_;
};

TEST_F(SystemdNotifyTest, StateMessagesArriveAsSystemdReadsThem) {
  NotifyStatus("loading rank 1: 40%");
  NotifyReady("serving\nmodel x");
  NotifyStopping("signal 15");
  const auto got = socket_.WaitFor("STOPPING=1", milliseconds(2000));
  ASSERT_EQ(got.size(), 3u);
  for (const auto& m : got) std::printf("message: %s\n", m.c_str());
  EXPECT_EQ(got[0], "STATUS=loading rank 1: 40%");
  EXPECT_EQ(got[1], "READY=1\nSTATUS=serving model x");  // the status stays one line
  EXPECT_EQ(got[2], "STOPPING=1\nSTATUS=signal 15");
}

TEST_F(SystemdNotifyTest, WatchdogIntervalIsHalfOfWatchdogUsecForThisProcessOnly) {
  ASSERT_TRUE(WatchdogPingInterval().has_value());
  EXPECT_EQ(WatchdogPingInterval()->count(), 100000);
  setenv("WATCHDOG_PID", "1", 1);  // the watchdog is meant for another process
  EXPECT_FALSE(WatchdogPingInterval().has_value());
  unsetenv("WATCHDOG_PID");
  EXPECT_TRUE(WatchdogPingInterval().has_value());
  unsetenv("WATCHDOG_USEC");
  EXPECT_FALSE(WatchdogPingInterval().has_value());
  EXPECT_FALSE(WatchdogKicker().enabled());
}

TEST_F(SystemdNotifyTest, KickerSendsAtMostOncePerHalfInterval) {
  WatchdogKicker kicker;  // ping interval 100 ms: at most one WATCHDOG=1 per 50 ms
  ASSERT_TRUE(kicker.enabled());
  for (int i = 0; i < 20; ++i) kicker.Kick();
  EXPECT_EQ(CountContaining(socket_.Drain(milliseconds(100)), "WATCHDOG=1"), 1);
  std::this_thread::sleep_for(milliseconds(60));
  kicker.Kick();
  kicker.Kick();
  EXPECT_EQ(CountContaining(socket_.Drain(milliseconds(100)), "WATCHDOG=1"), 1);
}

TEST_F(SystemdNotifyTest, KickersOnSeveralThreadsStillSendOncePerHalfInterval) {
  WatchdogKicker kicker;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&kicker] {
      for (int i = 0; i < 1000; ++i) kicker.Kick();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(CountContaining(socket_.Drain(milliseconds(30)), "WATCHDOG=1"), 1);
}

// Blocks SIGUSR1 here, lets a helper thread deliver it to this thread after `after`, and waits.
int WaitWithCheck(std::function<bool()> alive, milliseconds after) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  const pthread_t self = pthread_self();
  std::thread killer([self, after] {
    std::this_thread::sleep_for(after);
    pthread_kill(self, SIGUSR1);
  });
  const int sig = WaitForSignalKeepingWatchdog(set, alive);
  killer.join();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  return sig;
}

TEST_F(SystemdNotifyTest, SignalWaitPingsWhileTheCheckPasses) {
  std::atomic<int> checks{0};
  EXPECT_EQ(WaitWithCheck([&] { return ++checks > 0; }, milliseconds(450)), SIGUSR1);
  const int pings = CountContaining(socket_.Drain(milliseconds(100)), "WATCHDOG=1");
  std::printf("checks %d, pings %d in 450 ms at a 100 ms interval\n", checks.load(), pings);
  EXPECT_GE(checks.load(), 3);
  EXPECT_EQ(pings, checks.load());
}

TEST_F(SystemdNotifyTest, SignalWaitStaysSilentWhileTheCheckFails) {
  std::atomic<int> checks{0};
  EXPECT_EQ(WaitWithCheck([&] { return ++checks < 0; }, milliseconds(350)), SIGUSR1);
  EXPECT_GE(checks.load(), 2);
  EXPECT_EQ(CountContaining(socket_.Drain(milliseconds(100)), "WATCHDOG=1"), 0);
}

}  // namespace
}  // namespace tandem::systemd
