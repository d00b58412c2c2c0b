// `tandem-infer serve` flags: the API key only from a file (--api-key is refused with the way
// out), the HTTP front door's limits, a key file that fails its checks stops Serve before any
// model is loaded, and what systemd hears from a serving process.
#include "infer/serve_command.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <fstream>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/common/notify_socket.h"
#include "tests/common/test_util.h"

namespace tandem::infer {
namespace {

TEST(ServeCommandTest, ApiKeyOnTheCommandLineIsRefusedWithTheWayOut) {
  auto o = ParseServeFlags({"--model", "/m", "--api-key", "sk-0123456789abcdef"});
  ASSERT_FALSE(o.ok());
  const std::string msg(o.status().message());
  EXPECT_NE(msg.find("--api-key-file PATH"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("sk-0123456789abcdef"), std::string::npos) << "the key must not be echoed";
  std::cout << msg << "\n";
}

TEST(ServeCommandTest, FrontDoorFlags) {
  auto o = ParseServeFlags({"--model", "/m", "--api-key-file", "/etc/tandem/api.key", "--max-body-bytes", "1048576",
                            "--max-connections", "300", "--max-in-flight", "40", "--header-timeout-ms", "1500",
                            "--body-timeout-ms", "20000", "--idle-timeout-ms", "5000", "--write-timeout-ms", "7000"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->api_key_file, "/etc/tandem/api.key");
  EXPECT_EQ(o->max_body_bytes, 1048576);
  EXPECT_EQ(o->max_connections, 300);
  EXPECT_EQ(o->max_in_flight, 40);
  EXPECT_EQ(o->header_timeout.count(), 1500);
  EXPECT_EQ(o->body_timeout.count(), 20000);
  EXPECT_EQ(o->idle_timeout.count(), 5000);
  EXPECT_EQ(o->write_timeout.count(), 7000);
  EXPECT_FALSE(ParseServeFlags({"--model", "/m", "--max-body-bytes", "0"}).ok());
  EXPECT_FALSE(ParseServeFlags({"--model", "/m", "--http-threads", "8"}).ok());  // renamed: --max-in-flight
}

TEST(ServeCommandTest, KvCacheDtypeFlag) {
  auto o = ParseServeFlags({"--model", "/m", "--kv-cache-dtype", "fp8"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->kv_cache_dtype, "fp8");
  EXPECT_EQ(ParseServeFlags({"--model", "/m"})->kv_cache_dtype, "auto");
  auto bad = ParseServeFlags({"--model", "/m", "--kv-cache-dtype", "e5m2"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--kv-cache-dtype"), absl::string_view::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("e5m2"), absl::string_view::npos) << bad.status();
}

TEST(ServeCommandTest, ANetworkAddressNeedsAnApiKeyOrInsecure) {
  auto open = ParseServeFlags({"--model", "/m", "--host", "0.0.0.0"});
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("--api-key-file"), absl::string_view::npos) << open.status();
  EXPECT_TRUE(ParseServeFlags({"--model", "/m", "--host", "0.0.0.0", "--api-key-file", "/k"}).ok());
  EXPECT_TRUE(ParseServeFlags({"--model", "/m", "--host", "0.0.0.0", "--insecure"}).ok());
  EXPECT_TRUE(ParseServeFlags({"--model", "/m", "--host", "127.0.0.1"}).ok());
  EXPECT_TRUE(ParseServeFlags({"--model", "/m"}).ok()) << "the default host is loopback";
}

TEST(ServeCommandTest, AWorldReadableKeyFileStopsServeBeforeLoading) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "serve_command_test";
  std::filesystem::create_directories(dir);
  const std::string key = (dir / "api.key").string();
  std::ofstream(key) << "sk-0123456789abcdef0123\n";
  ::chmod(key.c_str(), 0644);
  auto o = ParseServeFlags({"--model", "/does/not/exist", "--api-key-file", key});
  ASSERT_TRUE(o.ok());
  const absl::Status st = Serve(*o, [] { return true; });
  ASSERT_FALSE(st.ok());
  const std::string msg(st.message());
  EXPECT_NE(msg.find("--api-key-file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("chmod 600"), std::string::npos) << msg;
  std::cout << msg << "\n";
}

TEST(ServeCommandTest, MemoryFractionFlag) {
  auto o = ParseServeFlags({"--model", "/m", "--backend", "cuda", "--memory-fraction", "0.85"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_DOUBLE_EQ(o->memory_fraction, 0.85);
  EXPECT_EQ(o->backend, "cuda");
  auto dflt = ParseServeFlags({"--model", "/m"});
  ASSERT_TRUE(dflt.ok());
  EXPECT_DOUBLE_EQ(dflt->memory_fraction, 0);  // the backend's default
  EXPECT_TRUE(ParseServeFlags({"--model", "/m", "--memory-fraction=1"}).ok());
  for (const char* bad : {"0", "1.2", "-1", "lots", ""}) {
    auto b = ParseServeFlags({"--model", "/m", "--memory-fraction", bad});
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(b.status().message(), "--memory-fraction")) << b.status();
  }
}

// Under systemd (a fake NOTIFY_SOCKET): READY=1 once the tiny model serves, WATCHDOG=1 from the
// engine loop while it idles, STOPPING=1 when serving ends.
TEST(ServeCommandTest, TellsSystemdWhenItServesAndFeedsTheWatchdogFromTheEngine) {
  tandem::testing::FakeNotifySocket notify;
  setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "1000000", 1);  // a ping at least every 500 ms; the idle engine turns every second
  auto o = ParseServeFlags({"--model", tandem::testing::TestdataDir() + "/qwen3moe-tiny", "--port", "0",
                            "--kv-tokens", "256", "--max-model-len", "64", "--shutdown-timeout-s", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  std::atomic<bool> stop{false};
  absl::Status served;
  std::thread serve([&] { served = Serve(*o, [&] { return stop.load(); }); });
  const std::vector<std::string> ready = notify.WaitFor("READY=1", std::chrono::seconds(60));
  EXPECT_FALSE(ready.empty());
  if (!ready.empty()) {
    std::printf("ready: %s\n", ready.back().c_str());
    EXPECT_NE(ready.back().find("STATUS=serving qwen3moe-tiny on 127.0.0.1:"), std::string::npos) << ready.back();
  }
  const int pings = tandem::testing::CountContaining(notify.Drain(std::chrono::milliseconds(2600)), "WATCHDOG=1");
  std::printf("%d watchdog pings in 2.6 s\n", pings);
  EXPECT_GE(pings, 2);
  stop = true;
  EXPECT_FALSE(notify.WaitFor("STOPPING=1", std::chrono::seconds(10)).empty());
  serve.join();
  EXPECT_TRUE(served.ok()) << served;
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
}

}  // namespace
}  // namespace tandem::infer
