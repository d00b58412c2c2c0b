// The pure preflight comparison over hand-built NodeFacts: no agents, no network.
#include "controller/preflight.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "absl/strings/match.h"
#include "controller/cluster_spec.h"
#include "controller/preflight_output.h"
#include "tests/controller/preflight_facts.h"

namespace tandem::controller {
namespace {

using testing::kDefaultNccl;
using testing::kFiles;
using testing::kNow;
using testing::Layout;
using testing::Manifest;
using testing::Observe;
using testing::Row;
using testing::SparkFacts;
using testing::Spec;

void Print(const PreflightReport& r) { std::printf("%s", FormatPreflightTable(r, 0.0).c_str()); }

TEST(Preflight, IdenticalNodesPass) {
  PreflightReport r = ComparePreflight(Spec(), Observe(SparkFacts("spark1"), SparkFacts("spark2")), kNow);
  Print(r);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.Count(CheckStatus::kWarn), 0);
  EXPECT_EQ(r.checks.size(), 2u * 12u + 1u);  // twelve checks per node, api-auth once
  EXPECT_EQ(r.nccl_env["spark1"]["NCCL_IB_HCA"], "rocep1s0f0,rocep1s0f1");
  EXPECT_EQ(r.nccl_env["spark1"]["NCCL_IB_GID_INDEX"], "3");
  EXPECT_EQ(r.nccl_env["spark2"]["NCCL_SOCKET_IFNAME"], "enP7s7");
  EXPECT_EQ(r.nccl_env["spark2"]["GLOO_SOCKET_IFNAME"], "enP7s7");
}

TEST(Preflight, ModelOutsideTheAgentsRootsSaysSo) {
  v1::NodeFacts b = SparkFacts("spark2");
  b.mutable_model()->set_exists(false);
  b.mutable_model()->set_has_config(false);
  b.mutable_model()->set_error("PERMISSION_DENIED: /models/q is outside the model roots (this agent's model roots: /srv)");
  PreflightReport r = ComparePreflight(Spec(), Observe(SparkFacts("spark1"), b), kNow);
  const CheckResult& row = Row(r, kCheckModelPresent, "spark2");
  EXPECT_EQ(row.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StartsWith(row.found, "refused by the agent: PERMISSION_DENIED")) << row.found;
  EXPECT_TRUE(absl::StrContains(row.fix, "--model-root")) << row.fix;
}

TEST(Preflight, DifferentDriverFailsNamingBothNodes) {
  v1::NodeFacts b = SparkFacts("spark2");
  b.mutable_driver()->set_version("575.57.08");
  PreflightReport r = ComparePreflight(Spec(), Observe(SparkFacts("spark1"), b));
  Print(r);
  EXPECT_FALSE(r.ok());
  // Two nodes that differ: no majority, so both fail, each naming the other.
  const CheckResult& r1 = Row(r, kCheckDriverParity, "spark1");
  const CheckResult& r2 = Row(r, kCheckDriverParity, "spark2");
  EXPECT_EQ(r1.status, CheckStatus::kFail);
  EXPECT_EQ(r2.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(r1.expected, "575.57.08 as on spark2")) << r1.expected;
  EXPECT_TRUE(absl::StrContains(r2.expected, "580.95.05 as on spark1")) << r2.expected;
  EXPECT_EQ(Row(r, kCheckKernelParity, "spark1").status, CheckStatus::kPass);
}

TEST(Preflight, MajorityReferenceFailsOnlyTheOddNode) {
  std::string yaml = "model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:1'}\n  - {name: b, agent: 'h:2'}\n  - {name: c, agent: 'h:3'}\n";
  ClusterSpec spec = *ParseClusterSpec(yaml, "t.yaml");
  std::vector<NodeObservation> obs(3);
  for (int i = 0; i < 3; ++i) obs[i].facts = SparkFacts(std::string(1, 'a' + i));
  obs[2].facts->mutable_kernel()->set_release("6.8.0-45-generic");
  PreflightReport r = ComparePreflight(spec, obs);
  EXPECT_EQ(Row(r, kCheckKernelParity, "a").status, CheckStatus::kPass);
  EXPECT_EQ(Row(r, kCheckKernelParity, "b").status, CheckStatus::kPass);
  const CheckResult& c = Row(r, kCheckKernelParity, "c");
  EXPECT_EQ(c.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(c.expected, "6.11.0-1016-nvidia as on a, b (reference: majority)")) << c.expected;
}

TEST(Preflight, GidIndexDgxSparkIs3) {
  v1::NodeFacts f = SparkFacts("spark1");
  std::optional<v1::GidEntry> g = FindRoceV2Ipv4Gid(f.rdma(0));
  ASSERT_TRUE(g.has_value());
  std::printf("  DGX Spark layout: index %u %s %s\n", g->index(), g->type().c_str(), g->gid().c_str());
  EXPECT_EQ(g->index(), 3u);
}

TEST(Preflight, GidIndexWithIpv6EntriesIs5) {
  v1::NodeFacts f = SparkFacts("spark1", Layout::kWithIpv6, Layout::kWithIpv6);
  std::optional<v1::GidEntry> g = FindRoceV2Ipv4Gid(f.rdma(0));
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->index(), 5u);
  PreflightReport r = ComparePreflight(Spec(), Observe(f, SparkFacts("spark2", Layout::kWithIpv6, Layout::kWithIpv6)));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.nccl_env["spark1"]["NCCL_IB_GID_INDEX"], "5");
}

TEST(Preflight, NoIpv4GidFailsWithHint) {
  v1::NodeFacts a = SparkFacts("spark1", Layout::kDgxSpark, Layout::kNoIpv4);
  EXPECT_FALSE(FindRoceV2Ipv4Gid(a.rdma(1)).has_value());
  PreflightReport r = ComparePreflight(Spec(), Observe(a, SparkFacts("spark2")));
  Print(r);
  const CheckResult& row = Row(r, kCheckRoceGid, "spark1");
  EXPECT_EQ(row.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(row.found, "rocep1s0f1: no RoCE v2 GID with an IPv4 address")) << row.found;
  EXPECT_TRUE(absl::StrContains(row.fix, "configure IPv4 on enp1s0f1np1")) << row.fix;
  EXPECT_EQ(r.nccl_env["spark1"]["NCCL_IB_GID_INDEX"], "");
  EXPECT_EQ(Row(r, kCheckHcaNetdevs, "spark1").status, CheckStatus::kFail);  // the netdev has no IPv4 either
  EXPECT_EQ(Row(r, kCheckRoceGid, "spark2").status, CheckStatus::kPass);
}

TEST(Preflight, HcasDisagreeOnIndexFails) {
  // One half of the split port has an extra IPv6 address: its IPv4 entry moves to 5, the other stays at 3.
  v1::NodeFacts a = SparkFacts("spark1", Layout::kDgxSpark, Layout::kWithIpv6);
  PreflightReport r = ComparePreflight(Spec(), Observe(a, SparkFacts("spark2")));
  const CheckResult& row = Row(r, kCheckRoceGid, "spark1");
  EXPECT_EQ(row.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(row.found, "rocep1s0f0=3 rocep1s0f1=5")) << row.found;
  EXPECT_TRUE(absl::StrContains(row.found, "NCCL_IB_GID_INDEX is one number")) << row.found;
}

TEST(Preflight, ExplicitGidIndexIsVerified) {
  ClusterSpec good = Spec("nccl:\n  hca: [rocep1s0f0, rocep1s0f1]\n  socket_ifname: enP7s7\n  gid_index: 3\n");
  EXPECT_TRUE(ComparePreflight(good, Observe(SparkFacts("spark1"), SparkFacts("spark2"))).ok());
  // Index 2 is the RoCE v1 IPv4 entry: wrong protocol.
  ClusterSpec v1_index = Spec("nccl:\n  hca: [rocep1s0f0, rocep1s0f1]\n  socket_ifname: enP7s7\n  gid_index: 2\n");
  PreflightReport r = ComparePreflight(v1_index, Observe(SparkFacts("spark1"), SparkFacts("spark2")));
  const CheckResult& row = Row(r, kCheckRoceGid, "spark1");
  EXPECT_EQ(row.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(row.found, "index 2 is IB/RoCE v1 192.168.100.1")) << row.found;
  EXPECT_TRUE(absl::StrContains(row.fix, "set nccl.gid_index to 3")) << row.fix;
  // Index 3 on nodes with IPv6 entries is RoCE v2 but IPv6: mismatch.
  PreflightReport r6 = ComparePreflight(good, Observe(SparkFacts("spark1", Layout::kWithIpv6, Layout::kWithIpv6), SparkFacts("spark2")));
  EXPECT_EQ(Row(r6, kCheckRoceGid, "spark1").status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(Row(r6, kCheckRoceGid, "spark1").fix, "set nccl.gid_index to 5"));
  EXPECT_EQ(Row(r6, kCheckRoceGid, "spark2").status, CheckStatus::kPass);
}

TEST(Preflight, HcaNotPresentFails) {
  ClusterSpec spec = Spec("nccl:\n  hca: [mlx5_0]\n");
  PreflightReport r = ComparePreflight(spec, Observe(SparkFacts("spark1"), SparkFacts("spark2")));
  const CheckResult& row = Row(r, kCheckRoceGid, "spark1");
  EXPECT_EQ(row.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(row.found, "mlx5_0: not found (present: rocep1s0f0, rocep1s0f1)")) << row.found;
}

TEST(Preflight, AutoSelectsActiveEthernetHcas) {
  v1::NodeFacts a = SparkFacts("spark1");
  a.mutable_rdma(1)->mutable_ports(0)->set_state("1: DOWN");
  EXPECT_EQ(SelectHcas(NcclSpec{}, a), std::vector<std::string>{"rocep1s0f0"});
  PreflightReport r = ComparePreflight(Spec(""), Observe(a, SparkFacts("spark2")));
  EXPECT_EQ(r.nccl_env["spark1"]["NCCL_IB_HCA"], "rocep1s0f0");
  EXPECT_EQ(r.nccl_env["spark2"]["NCCL_IB_HCA"], "rocep1s0f0,rocep1s0f1");
  EXPECT_EQ(r.nccl_env["spark1"]["NCCL_SOCKET_IFNAME"], "enp1s0f0np0");  // auto: the HCA's netdev first
}

TEST(Preflight, NetdevDownFails) {
  v1::NodeFacts b = SparkFacts("spark2");
  for (auto& n : *b.mutable_netdevs()) {
    if (n.name() == "enp1s0f1np1") n.set_operstate("down");
  }
  PreflightReport r = ComparePreflight(Spec(), Observe(SparkFacts("spark1"), b));
  Print(r);
  const CheckResult& row = Row(r, kCheckHcaNetdevs, "spark2");
  EXPECT_EQ(row.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(row.found, "enp1s0f1np1 is down")) << row.found;
  EXPECT_TRUE(absl::StrContains(row.fix, "ip link set enp1s0f1np1 up")) << row.fix;
  EXPECT_EQ(Row(r, kCheckHcaNetdevs, "spark1").status, CheckStatus::kPass);
}

TEST(Preflight, SocketIfnameDownOrMissingFails) {
  v1::NodeFacts b = SparkFacts("spark2");
  for (auto& n : *b.mutable_netdevs()) {
    if (n.name() == "enP7s7") n.clear_ipv4();
  }
  PreflightReport r = ComparePreflight(Spec(), Observe(SparkFacts("spark1"), b));
  EXPECT_EQ(Row(r, kCheckSocketIfname, "spark2").status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(Row(r, kCheckSocketIfname, "spark2").fix, "configure IPv4 on enP7s7"));
  ClusterSpec typo = Spec("nccl:\n  socket_ifname: eth9\n");
  PreflightReport r2 = ComparePreflight(typo, Observe(SparkFacts("spark1"), SparkFacts("spark2")));
  EXPECT_TRUE(absl::StrContains(Row(r2, kCheckSocketIfname, "spark1").found, "eth9 not found"));
}

TEST(Preflight, SwapWarns) {
  v1::NodeFacts a = SparkFacts("spark1");
  a.mutable_memory()->set_swap_total_bytes(16ull << 30);
  PreflightReport r = ComparePreflight(Spec(), Observe(a, SparkFacts("spark2")));
  EXPECT_TRUE(r.ok());  // a warning does not stop anything
  const CheckResult& row = Row(r, kCheckSwap, "spark1");
  EXPECT_EQ(row.status, CheckStatus::kWarn);
  EXPECT_EQ(row.found, "swap on: 16.0 GiB");
}

TEST(Preflight, MemoryAdmission) {
  v1::NodeFacts a = SparkFacts("spark1");
  a.mutable_memory()->set_available_bytes(64ull << 30);  // 50% < 70%
  PreflightReport r = ComparePreflight(Spec(), Observe(a, SparkFacts("spark2")));
  Print(r);
  const CheckResult& row = Row(r, kCheckMemory, "spark1");
  EXPECT_EQ(row.status, CheckStatus::kFail);
  EXPECT_EQ(row.found, "64.0 GiB available of 128.0 GiB (50%)");
  EXPECT_TRUE(absl::StrContains(row.expected, ">= 70% of MemTotal (89.6 GiB")) << row.expected;
  // The same node passes with a lower fraction.
  PreflightReport ok = ComparePreflight(Spec("", "engine:\n  memory_fraction: 0.5\n"), Observe(a, SparkFacts("spark2")));
  EXPECT_EQ(Row(ok, kCheckMemory, "spark1").status, CheckStatus::kPass);
  // backend cuda: the fraction is of GPU memory, so short host memory only warns.
  PreflightReport gpu = ComparePreflight(Spec("", "engine:\n  backend: cuda\n"), Observe(a, SparkFacts("spark2")));
  EXPECT_EQ(Row(gpu, kCheckMemory, "spark1").status, CheckStatus::kWarn);
  EXPECT_TRUE(absl::StrContains(Row(gpu, kCheckMemory, "spark1").fix, "backend cuda")) << Row(gpu, kCheckMemory, "spark1").fix;
}

TEST(Preflight, WeightsDifferAndMissingNameFiles) {
  auto obs = Observe(SparkFacts("spark1"), SparkFacts("spark2"));
  obs[1].manifest = Manifest({{"config.json", "11"}, {"model-00001.safetensors", "ff"}});
  PreflightReport r = ComparePreflight(Spec(), obs);
  Print(r);
  EXPECT_FALSE(r.ok());
  const CheckResult& r2 = Row(r, kCheckWeightsParity, "spark2");
  EXPECT_EQ(r2.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(r2.found, "differs: model-00001.safetensors")) << r2.found;
  EXPECT_TRUE(absl::StrContains(r2.found, "missing: model-00002.safetensors")) << r2.found;
  EXPECT_TRUE(absl::StrContains(r2.expected, "as on spark1")) << r2.expected;
  const CheckResult& r1 = Row(r, kCheckWeightsParity, "spark1");
  EXPECT_TRUE(absl::StrContains(r1.found, "extra: model-00002.safetensors")) << r1.found;
  EXPECT_TRUE(absl::StrContains(r1.expected, "as on spark2")) << r1.expected;
}

// A node whose folder could not be hashed is left out of parity with its own failed row: the
// agent refused or failed the whole request (its status), or could not list a sub-folder (the
// manifest's error: the files under it are missing, so the manifest cannot be compared).
TEST(Preflight, HashingThatFailedIsItsOwnRow) {
  struct Case {
    std::function<void(NodeObservation*)> observe;
    std::string found;
  };
  const std::vector<Case> cases = {
      {[](NodeObservation* o) { o->manifest = absl::NotFoundError("HashWeights: model folder /models/q: gone"); },
       "hashing failed: HashWeights: model folder /models/q: gone"},
      {[](NodeObservation* o) { (*o->manifest)->set_error("cannot list /models/q/sub: Permission denied"); },
       "hashing failed: cannot list /models/q/sub: Permission denied"},
  };
  for (const Case& c : cases) {
    auto obs = Observe(SparkFacts("spark1"), SparkFacts("spark2"));
    c.observe(&obs[1]);
    PreflightReport r = ComparePreflight(Spec(), obs);
    const CheckResult& failed = Row(r, kCheckWeightsParity, "spark2");
    EXPECT_EQ(failed.status, CheckStatus::kFail);
    EXPECT_EQ(failed.found, c.found);
    EXPECT_EQ(failed.fix, "check /models/q on spark2");
    // The other node has nobody to be compared with: it passes alone.
    EXPECT_EQ(Row(r, kCheckWeightsParity, "spark1").status, CheckStatus::kPass);
  }
}

TEST(Preflight, UnreachableAgentFailsNamingAddressAndOthersStillCompared) {
  auto obs = Observe(SparkFacts("spark1"), SparkFacts("spark2"));
  obs[1].facts = absl::UnavailableError("unreachable: connection refused");
  PreflightReport r = ComparePreflight(Spec(), obs);
  Print(r);
  EXPECT_FALSE(r.ok());
  const CheckResult& row = Row(r, kCheckAgentReachable, "spark2");
  EXPECT_EQ(row.status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(row.found, "10.0.0.2:9300")) << row.found;
  EXPECT_EQ(Row(r, kCheckDriverParity, "spark1").status, CheckStatus::kPass);
  EXPECT_EQ(r.nccl_env.count("spark2"), 0u);
}

TEST(Preflight, ModelFolderMissingFails) {
  v1::NodeFacts b = SparkFacts("spark2");
  b.mutable_model()->set_has_config(false);
  auto obs = Observe(SparkFacts("spark1"), b);
  obs[1].manifest.reset();
  obs[1].manifest_skipped_reason = "model folder missing or incomplete";
  PreflightReport r = ComparePreflight(Spec(), obs);
  EXPECT_EQ(Row(r, kCheckModelPresent, "spark2").status, CheckStatus::kFail);
  EXPECT_TRUE(absl::StrContains(Row(r, kCheckModelPresent, "spark2").found, "no config.json"));
  EXPECT_EQ(Row(r, kCheckWeightsParity, "spark2").status, CheckStatus::kWarn);
}

TEST(Preflight, NoDriverNoRdmaIsAnHonestDevBox) {
  // This build machine: no NVIDIA driver, no RDMA. Parity holds; the verdicts are warnings.
  v1::NodeFacts a = SparkFacts("spark1"), b = SparkFacts("spark2");
  for (v1::NodeFacts* f : {&a, &b}) {
    f->mutable_driver()->clear_version();
    f->clear_rdma();
  }
  PreflightReport r = ComparePreflight(Spec("nccl:\n  socket_ifname: enP7s7\n"), Observe(a, b));
  Print(r);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(Row(r, kCheckDriverParity, "spark1").status, CheckStatus::kWarn);
  EXPECT_EQ(Row(r, kCheckDriverParity, "spark1").found, "no NVIDIA driver");
  EXPECT_EQ(Row(r, kCheckRoceGid, "spark2").status, CheckStatus::kWarn);
  EXPECT_EQ(r.nccl_env["spark1"]["NCCL_IB_DISABLE"], "1");
  EXPECT_EQ(r.nccl_env["spark1"]["NCCL_IB_HCA"], "");
}

TEST(Preflight, Ipv4MappedGidParsing) {
  std::string ip;
  EXPECT_TRUE(IsIpv4MappedGid("0000:0000:0000:0000:0000:ffff:c0a8:6401", &ip));
  EXPECT_EQ(ip, "192.168.100.1");
  EXPECT_FALSE(IsIpv4MappedGid("fe80:0000:0000:0000:4e26:1234:5678:9abc"));
  EXPECT_FALSE(IsIpv4MappedGid("::ffff:192.168.100.1"));
}

}  // namespace
}  // namespace tandem::controller
