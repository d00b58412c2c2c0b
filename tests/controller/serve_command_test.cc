// What systemd hears from `tandemctl serve` (RunServe in-process, agents that do not answer):
// READY=1 after the first reconcile turn with the cluster's state as STATUS=, WATCHDOG=1 from the
// reconcile loop while it turns, STOPPING=1 when it is told to stop.
#include "controller/serve_command.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tests/common/fake_node.h"
#include "tests/common/notify_socket.h"
#include "tests/common/test_util.h"

namespace tandem::controller {
namespace {

using std::chrono::milliseconds;
using tandem::testing::CountContaining;

TEST(ServeCommandTest, ReadyAfterTheFirstTurnThenWatchdogFromTheLoopAndStopping) {
  tandem::testing::TempDir dir;
  const std::string token = dir / "token";
  tandem::testing::WriteTextFile(token, "0123456789abcdef-serve-test\n");
  ::chmod(token.c_str(), 0600);
  std::string yaml = "cluster: notify\nmodel:\n  path: " + dir.path() +
                     "\n  served_name: tiny\nengine:\n  backend: cpu\n  kv_tokens: 2048\nauth:\n  token_file: " + token +
                     "\nnodes:\n";
  for (int i = 0; i < 2; ++i) {
    yaml += "  - name: n" + std::to_string(i + 1) + "\n    agent: 127.0.0.1:" +
            std::to_string(tandem::testing::UnusedLoopbackPort()) + "\n";
  }
  tandem::testing::WriteTextFile(dir / "cluster.yaml", yaml);

  tandem::testing::FakeNotifySocket notify;
  setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "400000", 1);  // a keep-alive at least every 200 ms
  ServeCommandOptions o;
  o.cluster_file = dir / "cluster.yaml";
  o.state_dir = dir / "state";
  o.loop_interval = milliseconds(100);
  std::atomic<bool> stop{false};
  int rc = -1;
  std::thread serve([&] { rc = RunServe(o, &stop); });

  const std::vector<std::string> ready = notify.WaitFor("READY=1", milliseconds(20000));
  ASSERT_FALSE(ready.empty());
  std::printf("ready message: %s\n", ready.back().c_str());
  EXPECT_NE(ready.back().find("STATUS=cluster "), std::string::npos) << ready.back();
  const int pings = CountContaining(notify.Drain(milliseconds(1000)), "WATCHDOG=1");
  std::printf("%d watchdog pings in 1 s\n", pings);
  EXPECT_GE(pings, 3);

  stop = true;
  EXPECT_FALSE(notify.WaitFor("STOPPING=1", milliseconds(10000)).empty());
  serve.join();
  EXPECT_EQ(rc, 0);
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
}

}  // namespace
}  // namespace tandem::controller
