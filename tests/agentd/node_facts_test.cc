// Node facts over fake sysfs/procfs trees (tests/common/fake_node.h).
#include "agentd/node_facts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
namespace fs = std::filesystem;
using tandem::testing::FakeNodeOptions;
using tandem::testing::GidLayout;
using tandem::testing::TempDir;
using tandem::testing::WriteFakeNode;
using tandem::testing::WriteTextFile;

FactsRoots Roots(const std::pair<std::string, std::string>& p) { return FactsRoots{p.first, p.second}; }

const v1::RdmaDevice* FindHca(const v1::NodeFacts& f, const std::string& name) {
  for (const auto& d : f.rdma()) {
    if (d.name() == name) return &d;
  }
  return nullptr;
}

const v1::NetDev* FindNetdev(const v1::NodeFacts& f, const std::string& name) {
  for (const auto& n : f.netdevs()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

// The facts of a fake node whose HCA number `hca` has the GID table `layout`.
v1::NodeFacts FactsWithGids(int hca, GidLayout layout) {
  TempDir tmp;
  FakeNodeOptions o;
  o.hcas[hca].gids = layout;
  return CollectNodeFacts(Roots(WriteFakeNode(tmp.path(), o)), "n", "");
}

void PrintGids(const v1::RdmaPort& port) {
  for (const auto& g : port.gids()) {
    std::cout << "  gid[" << g.index() << "] " << g.gid() << " type=" << g.type() << " ndev=" << g.netdev()
              << " ipv4=" << g.ipv4() << (g.error().empty() ? "" : " error=" + g.error()) << "\n";
  }
}

TEST(NodeFactsTest, DgxSparkDefaults) {
  TempDir tmp;
  auto roots = Roots(WriteFakeNode(tmp.path(), FakeNodeOptions{}));
  v1::NodeFacts f = CollectNodeFacts(roots, "spark-a", "");
  EXPECT_EQ(f.node_name(), "spark-a");
  EXPECT_EQ(f.driver().version(), "580.95.05");
  EXPECT_EQ(f.driver().source(), roots.sysfs_root + "/module/nvidia/version");
  EXPECT_EQ(f.kernel().release(), "6.11.0-1016-nvidia");
  EXPECT_EQ(f.memory().total_bytes(), 128ull * 1024 * 1024 * 1024);
  EXPECT_EQ(f.memory().available_bytes(), 120ull * 1024 * 1024 * 1024);
  EXPECT_EQ(f.memory().swap_total_bytes(), 0u);
  EXPECT_EQ(f.memory().error(), "");
  ASSERT_EQ(f.gpus_size(), 1);
  EXPECT_EQ(f.gpus(0).model(), "NVIDIA GB10");
  EXPECT_EQ(f.gpus(0).uuid().rfind("GPU-", 0), 0u);
  EXPECT_EQ(f.gpus(0).bus_location(), "000f:01:00.0");
  EXPECT_FALSE(f.build().binary_sha256().empty());
  EXPECT_EQ(f.build().binary_sha256().size(), 64u);

  ASSERT_EQ(f.rdma_size(), 2);
  const v1::RdmaDevice* hca = FindHca(f, "rocep1s0f0");
  ASSERT_NE(hca, nullptr);
  EXPECT_EQ(hca->pci_address(), "0000:01:00.0");
  EXPECT_EQ(FindHca(f, "rocep1s0f1")->pci_address(), "0000:01:00.1");
  ASSERT_EQ(hca->netdevs_size(), 1);
  EXPECT_EQ(hca->netdevs(0), "enp1s0f0np0");
  EXPECT_EQ(hca->pcie_link_speed(), "32.0 GT/s PCIe");
  EXPECT_EQ(hca->pcie_link_width(), "4");
  EXPECT_NEAR(hca->pcie_gbps_ceiling(), 32.0 * 4 * 128 / 130, 1e-9);
  ASSERT_EQ(hca->ports_size(), 1);
  const v1::RdmaPort& port = hca->ports(0);
  PrintGids(port);
  EXPECT_EQ(port.port(), 1u);
  EXPECT_EQ(port.state(), "4: ACTIVE");
  EXPECT_EQ(port.phys_state(), "5: LinkUp");
  EXPECT_EQ(port.link_layer(), "Ethernet");
  // Zero slots (4..15) are skipped; 0/1 link-local, 2/3 IPv4-mapped v1/v2.
  ASSERT_EQ(port.gids_size(), 4);
  EXPECT_EQ(port.gids(0).gid().substr(0, 4), "fe80");
  EXPECT_EQ(port.gids(0).type(), "IB/RoCE v1");
  EXPECT_EQ(port.gids(1).type(), "RoCE v2");
  EXPECT_EQ(port.gids(1).ipv4(), "");
  EXPECT_EQ(port.gids(3).index(), 3u);
  EXPECT_EQ(port.gids(3).type(), "RoCE v2");
  EXPECT_EQ(port.gids(3).gid(), "0000:0000:0000:0000:0000:ffff:c0a8:6401");
  EXPECT_EQ(port.gids(3).ipv4(), "192.168.100.1");
  EXPECT_EQ(port.gids(3).netdev(), "enp1s0f0np0");
  EXPECT_EQ(port.gids(3).error(), "");

  // lo is listed (agents on one machine use it as their socket interface); HCA netdevs and the
  // socket interface are listed with their fake addresses.
  const v1::NetDev* lo = FindNetdev(f, "lo");
  ASSERT_NE(lo, nullptr);
  EXPECT_EQ(lo->operstate(), "unknown");
  ASSERT_EQ(lo->ipv4_size(), 1);
  EXPECT_EQ(lo->ipv4(0), "127.0.0.1/8");
  ASSERT_EQ(f.netdevs_size(), 4);
  const v1::NetDev* nd = FindNetdev(f, "enp1s0f1np1");
  ASSERT_NE(nd, nullptr);
  EXPECT_EQ(nd->operstate(), "up");
  EXPECT_EQ(nd->mtu(), 9000u);
  EXPECT_EQ(nd->speed_mbps(), 200000);
  ASSERT_EQ(nd->ipv4_size(), 1);
  EXPECT_EQ(nd->ipv4(0), "192.168.101.1/24");
  const v1::NetDev* sock = FindNetdev(f, "enP7s7");
  ASSERT_NE(sock, nullptr);
  ASSERT_EQ(sock->ipv4_size(), 1);
  EXPECT_EQ(sock->ipv4(0), "10.0.0.1/24");
  EXPECT_EQ(f.rdma_error(), "");
  EXPECT_EQ(f.netdevs_error(), "");
  EXPECT_GT(f.collected_unix_ms(), 0);
}

TEST(NodeFactsTest, ExtraIpv6EntriesShiftTheIpv4Index) {
  v1::NodeFacts f = FactsWithGids(0, GidLayout::kDgxSparkWithIpv6);
  const v1::RdmaPort& port = FindHca(f, "rocep1s0f0")->ports(0);
  PrintGids(port);
  ASSERT_EQ(port.gids_size(), 6);
  EXPECT_EQ(port.gids(2).ipv4(), "");
  EXPECT_EQ(port.gids(2).gid().substr(0, 4), "fd00");
  EXPECT_EQ(port.gids(5).index(), 5u);
  EXPECT_EQ(port.gids(5).type(), "RoCE v2");
  EXPECT_EQ(port.gids(5).ipv4(), "192.168.100.1");
  // The other HCA keeps the plain layout.
  EXPECT_EQ(FindHca(f, "rocep1s0f1")->ports(0).gids(3).ipv4(), "192.168.101.1");
}

TEST(NodeFactsTest, NoIpv4LeavesOnlyLinkLocalEntries) {
  v1::NodeFacts f = FactsWithGids(1, GidLayout::kNoIpv4);
  const v1::RdmaPort& port = FindHca(f, "rocep1s0f1")->ports(0);
  PrintGids(port);
  ASSERT_EQ(port.gids_size(), 2);
  for (const auto& g : port.gids()) EXPECT_EQ(g.ipv4(), "");
}

TEST(NodeFactsTest, UnreadableAttributeFilesAreToleratedPerEntry) {
  TempDir tmp;
  auto roots = Roots(WriteFakeNode(tmp.path(), FakeNodeOptions{}));
  const fs::path port = fs::path(roots.sysfs_root) / "class/infiniband/rocep1s0f0/ports/1";
  // chmod 000 does not stop root, so break the files differently: a directory in place of
  // the type file, a dangling symlink in place of the ndev file.
  fs::remove(port / "gid_attrs/types/2");
  fs::create_directory(port / "gid_attrs/types/2");
  fs::remove(port / "gid_attrs/ndevs/3");
  fs::create_symlink("/nonexistent/ndev", port / "gid_attrs/ndevs/3");
  fs::remove(port / "phys_state");
  fs::create_directory(port / "phys_state");
  v1::NodeFacts f = CollectNodeFacts(roots, "n", "");
  const v1::RdmaPort& p = FindHca(f, "rocep1s0f0")->ports(0);
  PrintGids(p);
  std::cout << "  port error: " << p.error() << "\n";
  ASSERT_EQ(p.gids_size(), 4);
  EXPECT_EQ(p.gids(2).type(), "");
  EXPECT_NE(p.gids(2).error().find("type"), std::string::npos);
  EXPECT_EQ(p.gids(2).ipv4(), "192.168.100.1");  // the GID itself still read
  EXPECT_EQ(p.gids(3).type(), "RoCE v2");
  EXPECT_EQ(p.gids(3).netdev(), "");
  EXPECT_NE(p.gids(3).error().find("ndev"), std::string::npos);
  EXPECT_EQ(p.state(), "4: ACTIVE");
  EXPECT_NE(p.error().find("phys_state"), std::string::npos);
}

TEST(NodeFactsTest, MissingDriverIsAnErrorTextNotACrash) {
  TempDir tmp;
  FakeNodeOptions o;
  o.driver_version = "";
  auto roots = Roots(WriteFakeNode(tmp.path(), o));
  v1::NodeFacts f = CollectNodeFacts(roots, "n", "");
  std::cout << "driver error: " << f.driver().error() << "\ngpus error: " << f.gpus_error() << "\n";
  EXPECT_EQ(f.driver().version(), "");
  EXPECT_NE(f.driver().error().find("no NVIDIA driver"), std::string::npos);
  EXPECT_EQ(f.gpus_size(), 0);
  EXPECT_FALSE(f.gpus_error().empty());
}

TEST(NodeFactsTest, DriverFromProcfsWhenSysfsLacksIt) {
  TempDir tmp;
  FakeNodeOptions o;
  o.driver_in_sysfs = false;
  o.driver_version = "575.51.03";
  auto roots = Roots(WriteFakeNode(tmp.path(), o));
  v1::DriverFact d = ReadDriverFact(roots);
  EXPECT_EQ(d.version(), "575.51.03");
  EXPECT_EQ(d.source(), roots.procfs_root + "/driver/nvidia/version");
}

TEST(NodeFactsTest, ParseNvrmVersionVariants) {
  EXPECT_EQ(*ParseNvrmVersion("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  "
                              "Release Build  (dvs-builder@U22)  Wed Sep 24 2025\nGCC version: 13.3.0\n"),
            "580.95.05");
  EXPECT_EQ(*ParseNvrmVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"),
            "550.54.14");
  EXPECT_FALSE(ParseNvrmVersion("garbage\n").ok());
  EXPECT_FALSE(ParseNvrmVersion("NVRM version: NVIDIA Kernel Module without number\n").ok());
}

TEST(NodeFactsTest, MeminfoParsing) {
  v1::MemoryFact m = ParseMeminfo(
      "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   100000000 kB\n"
      "SwapTotal:       16777212 kB\nSwapFree:        16777212 kB\n");
  EXPECT_EQ(m.total_bytes(), 131072000ull * 1024);
  EXPECT_EQ(m.available_bytes(), 100000000ull * 1024);
  EXPECT_EQ(m.swap_total_bytes(), 16777212ull * 1024);
  EXPECT_EQ(m.error(), "");
  v1::MemoryFact bad = ParseMeminfo("MemTotal: 10 kB\nnonsense\n");
  EXPECT_EQ(bad.total_bytes(), 10240u);
  EXPECT_NE(bad.error().find("MemAvailable"), std::string::npos);
  EXPECT_NE(bad.error().find("SwapTotal"), std::string::npos);

  TempDir tmp;
  FakeNodeOptions o;
  o.swap_total_kb = 8 * 1024 * 1024;
  auto roots = Roots(WriteFakeNode(tmp.path(), o));
  EXPECT_EQ(ReadMemoryFact(roots).swap_total_bytes(), 8ull << 30);
  fs::remove(roots.procfs_root + "/meminfo");
  EXPECT_FALSE(ReadMemoryFact(roots).error().empty());
}

TEST(NodeFactsTest, GidAndPcieHelpers) {
  EXPECT_EQ(GidToIpv4("0000:0000:0000:0000:0000:ffff:c0a8:6401"), "192.168.100.1");
  EXPECT_EQ(GidToIpv4("0000:0000:0000:0000:0000:ffff:0a00:0001"), "10.0.0.1");
  EXPECT_EQ(GidToIpv4("fe80:0000:0000:0000:4ebb:47ff:fe00:0100"), "");
  EXPECT_EQ(GidToIpv4("0000:0000:0000:0000:0000:0000:c0a8:6401"), "");  // IPv4-compatible, not mapped
  EXPECT_EQ(GidToIpv4("not a gid"), "");
  EXPECT_TRUE(IsZeroGid("0000:0000:0000:0000:0000:0000:0000:0000"));
  EXPECT_FALSE(IsZeroGid("fe80:0000:0000:0000:0000:0000:0000:0000"));
  EXPECT_NEAR(PcieGbpsCeiling("32.0 GT/s PCIe", "4"), 126.03, 0.01);  // gen5 x4
  EXPECT_NEAR(PcieGbpsCeiling("16.0 GT/s PCIe", "16"), 252.06, 0.01);  // gen4 x16
  EXPECT_NEAR(PcieGbpsCeiling("5.0 GT/s", "x8"), 32.0, 1e-9);         // gen2 x8, 8b/10b
  EXPECT_EQ(PcieGbpsCeiling("Unknown", "4"), 0.0);
  EXPECT_EQ(PcieGbpsCeiling("8 GT/s", ""), 0.0);
}

TEST(NodeFactsTest, MissingTreesGiveErrorsNotCrashes) {
  TempDir tmp;
  FactsRoots roots{tmp / "nosys", tmp / "noproc"};
  v1::NodeFacts f = CollectNodeFacts(roots, "n", tmp / "nomodel");
  EXPECT_FALSE(f.driver().error().empty());
  EXPECT_FALSE(f.kernel().error().empty());
  EXPECT_FALSE(f.memory().error().empty());
  EXPECT_FALSE(f.rdma_error().empty());
  EXPECT_FALSE(f.netdevs_error().empty());
  EXPECT_FALSE(f.model().exists());
  std::cout << "rdma_error: " << f.rdma_error() << "\nmodel error: " << f.model().error() << "\n";
}

TEST(NodeFactsTest, ModelFolderFact) {
  TempDir tmp;
  WriteTextFile(tmp / "m/config.json", "{}");
  WriteTextFile(tmp / "m/model-00001.safetensors", std::string(1000, 'x'));
  WriteTextFile(tmp / "m/sub/tokenizer.json", "abc");
  v1::ModelFolderFact m = ReadModelFolderFact(tmp / "m");
  EXPECT_TRUE(m.exists());
  EXPECT_TRUE(m.has_config());
  EXPECT_EQ(m.file_count(), 3u);
  EXPECT_EQ(m.total_bytes(), 1005u);
  fs::remove(tmp / "m/config.json");
  EXPECT_FALSE(ReadModelFolderFact(tmp / "m").has_config());
}

TEST(NodeFactsTest, FactsAreReadFreshEachTime) {
  TempDir tmp;
  auto roots = Roots(WriteFakeNode(tmp.path(), FakeNodeOptions{}));
  EXPECT_EQ(CollectNodeFacts(roots, "n", "").kernel().release(), "6.11.0-1016-nvidia");
  WriteTextFile(roots.procfs_root + "/sys/kernel/osrelease", "6.14.0-1\n");
  WriteTextFile(roots.sysfs_root + "/module/nvidia/version", "580.126.09\n");
  v1::NodeFacts f = CollectNodeFacts(roots, "n", "");
  EXPECT_EQ(f.kernel().release(), "6.14.0-1");
  EXPECT_EQ(f.driver().version(), "580.126.09");
}

}  // namespace
}  // namespace tandem::agentd

namespace tandem::agentd {
namespace {

// The readers on this machine's own /sys and /proc: whatever is there (no GPU, no RDMA on a
// CI box), nothing may crash and the kernel and memory facts must be real.
TEST(NodeFactsTest, RealSystemTreesDoNotCrash) {
  v1::NodeFacts f = CollectNodeFacts(FactsRoots{}, "self", "");
  std::cout << "kernel=" << f.kernel().release() << " mem=" << f.memory().total_bytes()
            << " driver=" << (f.driver().version().empty() ? f.driver().error() : f.driver().version())
            << " rdma=" << f.rdma_size() << " netdevs=" << f.netdevs_size() << "\n";
  for (const auto& n : f.netdevs()) {
    std::cout << "  " << n.name() << " " << n.operstate() << " mtu " << n.mtu() << " speed " << n.speed_mbps();
    for (const auto& a : n.ipv4()) std::cout << " " << a;
    std::cout << "\n";
  }
  EXPECT_FALSE(f.kernel().release().empty()) << f.kernel().error();
  EXPECT_GT(f.memory().total_bytes(), 0u) << f.memory().error();
}

}  // namespace
}  // namespace tandem::agentd
