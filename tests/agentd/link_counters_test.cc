// Interface counters for the link test: a fake CX-7 half (netdev statistics, `ethtool -S`
// style statistics file, the PCIe link of its function), the ways such a tree can be wrong, the
// real loopback interface of this machine and a veth pair in a namespace of the test's own
// through sysfs and the ethtool ioctl, and deltas.
#include "agentd/link_counters.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include <iostream>

#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
using tandem::testing::FakeNodeOptions;
using tandem::testing::TempDir;
using tandem::testing::WriteFakeNode;
using tandem::testing::WriteTextFile;

constexpr char kIf[] = "enp1s0f0np0";  // the first half of the default fake DGX Spark

// A fake DGX Spark whose first CX-7 half has counters.
FactsRoots FakeSpark(const TempDir& tmp) {
  auto [sys, proc] = WriteFakeNode(tmp / "node", FakeNodeOptions{});
  const std::string dir = sys + "/class/net/" + kIf;
  WriteTextFile(dir + "/statistics/rx_bytes", "123456789\n");
  WriteTextFile(dir + "/statistics/tx_bytes", "987654321\n");
  WriteTextFile(dir + "/statistics/rx_dropped", "0\n");
  // As `ethtool -S enp1s0f0np0` prints it on a CX-7 (a few of its ~300 lines).
  WriteTextFile(dir + "/ethtool_stats",
                "NIC statistics:\n"
                "     rx_packets: 1000\n"
                "     tx_bytes_phy: 5000000000\n"
                "     rx_bytes_phy: 4000000000\n"
                "     tx_discards_phy: 0\n"
                "     rx_discards_phy: 3\n"
                "     rx_out_of_buffer: 0\n"
                "     rx_corrected_bits_phy: 17\n"
                "     rx_pcs_symbol_err_phy: 0\n"
                "     rx_prio0_buf_discard: 0\n");
  return FactsRoots{sys, proc};
}

TEST(LinkCountersTest, FakeCx7HalfHasNetdevEthtoolAndPcie) {
  TempDir tmp;
  const FactsRoots roots = FakeSpark(tmp);
  auto c = ReadInterfaceCounters(roots, kIf);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, kIf);
  EXPECT_EQ(c->netdev, (std::map<std::string, uint64_t>{{"rx_bytes", 123456789}, {"tx_bytes", 987654321},
                                                         {"rx_dropped", 0}}));
  EXPECT_EQ(c->ethtool.size(), 9u);
  EXPECT_EQ(c->ethtool.at("tx_bytes_phy"), 5000000000u);
  EXPECT_EQ(c->ethtool.at("rx_discards_phy"), 3u);
  EXPECT_EQ(c->ethtool.at("rx_corrected_bits_phy"), 17u);
  EXPECT_EQ(c->ethtool_error, "");
  EXPECT_EQ(c->speed_mbps, 200000);
  EXPECT_TRUE(c->has_device);
  EXPECT_EQ(c->pcie_speed, "32.0 GT/s PCIe");
  EXPECT_EQ(c->pcie_width, "4");
  // gen5 x4: the ~126 Gb/s per-half ceiling of the issue.
  EXPECT_NEAR(c->pcie_gbps_ceiling, 32.0 * 4 * 128 / 130, 1e-9);
  EXPECT_GT(c->read_unix_ns, 0);
}

TEST(LinkCountersTest, NoEthtoolFileIsSaidNotFailed) {
  TempDir tmp;
  auto [sys, proc] = WriteFakeNode(tmp / "node", FakeNodeOptions{});
  auto c = ReadInterfaceCounters(FactsRoots{sys, proc}, "enp1s0f1np1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->ethtool.empty());
  EXPECT_NE(c->ethtool_error.find("ethtool_stats"), std::string::npos) << c->ethtool_error;
  EXPECT_TRUE(c->netdev.empty());  // the fake tree has no statistics folder for this one
}

TEST(LinkCountersTest, MalformedEthtoolLineNamesFileAndLine) {
  TempDir tmp;
  const FactsRoots roots = FakeSpark(tmp);
  const std::string path = roots.sysfs_root + "/class/net/" + kIf + "/ethtool_stats";
  WriteTextFile(path, "NIC statistics:\n     rx_bytes_phy: 10\n     tx_bytes_phy ten\n");
  auto c = ReadInterfaceCounters(roots, kIf);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(path + ":3:"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("tx_bytes_phy ten"), std::string::npos) << c.status();

  WriteTextFile(path, "rx_bytes_phy: -4\n");
  c = ReadInterfaceCounters(roots, kIf);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(path + ":1:"), std::string::npos) << c.status();
}

TEST(LinkCountersTest, NonNumericStatisticNamesTheFile) {
  TempDir tmp;
  const FactsRoots roots = FakeSpark(tmp);
  WriteTextFile(roots.sysfs_root + "/class/net/" + kIf + "/statistics/tx_bytes", "lots\n");
  auto c = ReadInterfaceCounters(roots, kIf);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("statistics/tx_bytes"), std::string::npos) << c.status();
}

TEST(LinkCountersTest, UnknownInterfaceIsNotFoundAndPathsAreRefused) {
  TempDir tmp;
  const FactsRoots roots = FakeSpark(tmp);
  EXPECT_EQ(ReadInterfaceCounters(roots, "eth9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadInterfaceCounters(roots, "../../module").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadInterfaceCounters(roots, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LinkCountersTest, NetdevOnlyReadLeavesEthtoolAndPcieAlone) {
  TempDir tmp;
  auto c = ReadInterfaceNetdevCounters(FakeSpark(tmp), kIf);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->netdev.at("tx_bytes"), 987654321u);
  EXPECT_EQ(c->speed_mbps, 200000);
  EXPECT_TRUE(c->ethtool.empty());
  EXPECT_EQ(c->pcie_gbps_ceiling, 0);
}

// The machine's own loopback under the real /sys: the statistics move by what we send through
// it, and the ethtool ioctl either returns the driver's set or says why there is none.
TEST(LinkCountersTest, RealLoopbackCountsWhatWeSend) {
  auto before = ReadInterfaceCounters(FactsRoots{}, "lo");
  if (!before.ok() && before.status().code() == absl::StatusCode::kNotFound) {
    GTEST_SKIP() << "no /sys/class/net/lo here: " << before.status();
  }
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(before->netdev.count("tx_bytes")) << "statistics/tx_bytes missing";
  std::cout << "lo: " << before->netdev.size() << " netdev counters, " << before->ethtool.size()
            << " ethtool counters" << (before->ethtool_error.empty() ? "" : " (" + before->ethtool_error + ")")
            << "\n";
  EXPECT_TRUE(before->ethtool.empty() != before->ethtool_error.empty())
      << "an empty ethtool set must say why, a filled one must not";

  // 20 datagrams of 1000 bytes to a bound loopback socket.
  int rx = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int tx = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(rx, 0);
  ASSERT_GE(tx, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(rx, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(rx, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string payload(1000, 'x');
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(::sendto(tx, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              static_cast<ssize_t>(payload.size()));
  }
  ::close(tx);
  ::close(rx);

  auto after = ReadInterfaceCounters(FactsRoots{}, "lo");
  ASSERT_TRUE(after.ok()) << after.status();
  const auto delta = CounterDelta(before->netdev, after->netdev);
  EXPECT_GE(delta.at("tx_bytes"), 20u * 1000);
  EXPECT_GE(delta.at("rx_packets"), 20u);
  EXPECT_GE(after->read_unix_ns, before->read_unix_ns);
  EXPECT_EQ(after->pcie_gbps_ceiling, 0) << "lo sits on no PCIe link";
  EXPECT_FALSE(after->has_device) << "lo is virtual";
}

// In a child process with a network and mount namespace of its own (root only; skipped
// otherwise): a veth pair, whose driver offers ethtool statistics, read through the real ioctl.
// The child mounts a sysfs of its namespace on /sys, as `ip netns exec` does, so nothing of the
// machine's own network is touched. Its findings come back through a pipe.
TEST(LinkCountersTest, RealVethInANamespaceOffersEthtoolStatistics) {
  if (::geteuid() != 0 || std::system("command -v ip >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs root and iproute2";
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto report = [&](const std::string& text, int code) {
      (void)!::write(fds[1], text.data(), text.size());
      ::_exit(code);
    };
    if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) report(std::string("skip: unshare: ") + std::strerror(errno), 77);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::umount2("/sys", MNT_DETACH) != 0 || ::mount("sysfs", "/sys", "sysfs", 0, nullptr) != 0) {
      report(std::string("skip: sysfs of the namespace: ") + std::strerror(errno), 77);
    }
    if (std::system("ip link add tdmv0 type veth peer name tdmv1 && ip link set tdmv0 up && ip link set tdmv1 up") != 0) {
      report("skip: ip link add veth failed", 77);
    }
    auto c = ReadInterfaceCounters(FactsRoots{}, "tdmv0");
    if (!c.ok()) report("read: " + std::string(c.status().message()), 1);
    std::string out = "netdev=" + std::to_string(c->netdev.size()) + " ethtool=" + std::to_string(c->ethtool.size()) +
                      " has_device=" + std::to_string(c->has_device) + " peer_ifindex=" +
                      std::to_string(c->ethtool.count("peer_ifindex")) + " error=" + c->ethtool_error;
    report(out, 0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << text;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << text;
  ASSERT_EQ(WEXITSTATUS(status), 0) << text;
  std::cout << "veth: " << text << "\n";
  EXPECT_NE(text.find("has_device=0"), std::string::npos) << text;
  EXPECT_NE(text.find("peer_ifindex=1"), std::string::npos) << "veth's ethtool set names its peer: " << text;
  EXPECT_NE(text.find("error="), std::string::npos);
  EXPECT_EQ(text.substr(text.find("error=")), "error=") << "statistics were offered, so no reason is given";
  EXPECT_EQ(text.find("netdev=0"), std::string::npos) << text;
}

TEST(LinkCountersTest, DeltaDropsCountersThatWentBackOrAppearOnOneSide) {
  const std::map<std::string, uint64_t> before = {{"tx_bytes", 100}, {"rx_bytes", 500}, {"gone", 1}};
  const std::map<std::string, uint64_t> after = {{"tx_bytes", 350}, {"rx_bytes", 20}, {"new", 9}};
  EXPECT_EQ(CounterDelta(before, after), (std::map<std::string, uint64_t>{{"tx_bytes", 250}}));
  EXPECT_EQ(CounterDelta(after, after).at("new"), 0u);
}

}  // namespace
}  // namespace tandem::agentd
