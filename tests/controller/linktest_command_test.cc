// tandemctl linktest without agents: which interfaces pair up from hand-built facts (subnets,
// explicit lists, loopback clusters, failures), how canned LinkSend / LinkReceive replies become
// verdicts, the table and the JSON, and the command line.
#include "controller/linktest_command.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "controller/linktest_plan.h"

namespace tandem::controller {
namespace {

using agentd::LinkVerdictKind;

ClusterSpec Spec(const std::string& a_agent, const std::string& b_agent, const std::string& extra_a = "") {
  const std::string yaml = "cluster: t\nmodel: {path: /m}\nnodes:\n  - name: a\n    agent: " + a_agent + "\n" + extra_a +
                           "  - name: b\n    agent: " + b_agent + "\n";
  absl::StatusOr<ClusterSpec> spec = ParseClusterSpec(yaml, "cluster.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ClusterSpec{};
}

void AddNetdev(v1::NodeFacts* f, const std::string& name, const std::string& operstate,
               const std::vector<std::string>& ipv4) {
  v1::NetDev* d = f->add_netdevs();
  d->set_name(name);
  d->set_operstate(operstate);
  for (const std::string& a : ipv4) d->add_ipv4(a);
}

// Two DGX Sparks: both halves of the CX-7 port on their own /24, a management network, loopback,
// and a docker bridge that is down.
std::vector<absl::StatusOr<v1::NodeFacts>> SparkFacts() {
  v1::NodeFacts a, b;
  AddNetdev(&a, "lo", "unknown", {"127.0.0.1/8"});
  AddNetdev(&a, "enp1s0f0np0", "up", {"192.168.100.1/24"});
  AddNetdev(&a, "enP2p1s0f1np1", "up", {"192.168.101.1/24"});
  AddNetdev(&a, "wlan0", "up", {"10.0.0.5/24"});
  AddNetdev(&a, "docker0", "down", {"172.17.0.1/16"});
  AddNetdev(&b, "lo", "unknown", {"127.0.0.1/8"});
  AddNetdev(&b, "enp1s0f0np0", "up", {"192.168.100.2/24"});
  AddNetdev(&b, "enP2p1s0f1np1", "up", {"192.168.101.2/24"});
  AddNetdev(&b, "eth0", "up", {"10.0.0.6/24"});
  AddNetdev(&b, "docker0", "down", {"172.17.0.1/16"});
  return {a, b};
}

std::string Halves(const LinkPairPlan& p) {
  std::string out;
  for (const LinkHalfPlan& h : p.halves) {
    out += h.interface + ">" + h.peer_interface + "@" + h.peer_ipv4 + " ";
  }
  return out;
}

TEST(LinktestPlanTest, EverySharedSubnetIsAHalfOfEveryOrderedPair) {
  const ClusterSpec spec = Spec("10.0.0.5:7101", "10.0.0.6:7101");
  const auto lists = LinkInterfaceLists(spec, {});
  ASSERT_TRUE(lists.ok());
  const std::vector<LinkPairPlan> plans = PlanLinkPairs(spec, SparkFacts(), *lists);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].from_name, "a");
  EXPECT_EQ(plans[0].to_name, "b");
  EXPECT_EQ(plans[0].error, "");
  // Loopback and the down bridge (same subnet on both, but down) are left out.
  EXPECT_EQ(Halves(plans[0]),
            "enp1s0f0np0>enp1s0f0np0@192.168.100.2 enP2p1s0f1np1>enP2p1s0f1np1@192.168.101.2 wlan0>eth0@10.0.0.6 ");
  EXPECT_EQ(plans[1].from_name, "b");
  EXPECT_EQ(Halves(plans[1]),
            "enp1s0f0np0>enp1s0f0np0@192.168.100.1 enP2p1s0f1np1>enP2p1s0f1np1@192.168.101.1 eth0>wlan0@10.0.0.5 ");
}

TEST(LinktestPlanTest, ExplicitListsFromTheFileAndTheFlag) {
  const ClusterSpec spec = Spec("10.0.0.5:7101", "10.0.0.6:7101",
                                "    linktest: {interfaces: [enp1s0f0np0, enP2p1s0f1np1]}\n");
  ASSERT_EQ(spec.nodes[0].linktest_interfaces.size(), 2u);
  auto lists = LinkInterfaceLists(spec, {});
  ASSERT_TRUE(lists.ok());
  std::vector<LinkPairPlan> plans = PlanLinkPairs(spec, SparkFacts(), *lists);
  EXPECT_EQ(Halves(plans[0]),
            "enp1s0f0np0>enp1s0f0np0@192.168.100.2 enP2p1s0f1np1>enP2p1s0f1np1@192.168.101.2 ");
  // b has no list, but a's list holds for a's receiving end too: b's eth0 finds no wlan0.
  EXPECT_EQ(Halves(plans[1]),
            "enp1s0f0np0>enp1s0f0np0@192.168.100.1 enP2p1s0f1np1>enP2p1s0f1np1@192.168.101.1 ");

  // NODE=IF replaces that node's list; IF applies to every node.
  lists = LinkInterfaceLists(spec, {"a=enP2p1s0f1np1", "b=enP2p1s0f1np1"});
  ASSERT_TRUE(lists.ok());
  plans = PlanLinkPairs(spec, SparkFacts(), *lists);
  EXPECT_EQ(Halves(plans[0]), "enP2p1s0f1np1>enP2p1s0f1np1@192.168.101.2 ");
  lists = LinkInterfaceLists(spec, {"enp1s0f0np0"});
  ASSERT_TRUE(lists.ok());
  EXPECT_EQ(Halves(PlanLinkPairs(spec, SparkFacts(), *lists)[1]), "enp1s0f0np0>enp1s0f0np0@192.168.100.1 ");

  const auto twice = ParseClusterSpec(
      "model: {path: /m}\nnodes:\n  - name: a\n    agent: h:1\n    linktest: {interfaces: [f0, f0]}\n", "c.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("nodes[0].linktest.interfaces[1]: \"f0\" listed twice"), std::string::npos)
      << twice.status();

  const auto unknown = LinkInterfaceLists(spec, {"c=eth0"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no node \"c\""), std::string::npos);

  // A listed interface the node does not have fails both of its pairs, naming it.
  lists = LinkInterfaceLists(spec, {"a=ib0"});
  plans = PlanLinkPairs(spec, SparkFacts(), *lists);
  EXPECT_EQ(plans[0].error, "a has no IPv4 on ib0 (linktest interfaces)");
  EXPECT_EQ(plans[1].error, plans[0].error);
  EXPECT_TRUE(plans[0].halves.empty());
}

TEST(LinktestPlanTest, LoopbackClusterUsesLoopbackOnly) {
  const ClusterSpec spec = Spec("127.0.0.1:7101", "127.0.0.1:7102");
  const std::vector<LinkPairPlan> plans = PlanLinkPairs(spec, SparkFacts(), *LinkInterfaceLists(spec, {}));
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(Halves(plans[0]), "lo>lo@127.0.0.1 ");
  EXPECT_EQ(Halves(plans[1]), "lo>lo@127.0.0.1 ");
}

TEST(LinktestPlanTest, NoSharedSubnetOrNoFactsFailsThePair) {
  const ClusterSpec spec = Spec("10.0.0.5:7101", "10.9.0.6:7101");
  v1::NodeFacts a, b;
  AddNetdev(&a, "eth0", "up", {"10.0.0.5/24"});
  AddNetdev(&b, "eth0", "up", {"10.9.0.6/24"});
  std::vector<LinkPairPlan> plans = PlanLinkPairs(spec, {a, b}, *LinkInterfaceLists(spec, {}));
  EXPECT_NE(plans[0].error.find("no interface of a shares a subnet with one of b"), std::string::npos);
  plans = PlanLinkPairs(spec, {a, absl::UnavailableError("GetFacts: unreachable")}, *LinkInterfaceLists(spec, {}));
  EXPECT_EQ(plans[0].error, "b: GetFacts: unreachable");
  EXPECT_EQ(plans[1].error, "b: GetFacts: unreachable");
}

// The sender's and receiver's answers for one half, `gbps` over 5 s.
void AddHalf(v1::LinkSendResponse* tx, v1::LinkReceiveSummary* rx, const std::string& ifname, double gbps,
             uint64_t retransmits, int64_t speed_a, int64_t speed_b) {
  const uint64_t bytes = static_cast<uint64_t>(gbps * 1e9 / 8 * 5);
  v1::LinkSendResult* s = tx->add_results();
  s->set_interface(ifname);
  s->set_bytes_sent(bytes);
  s->set_seconds(5.2);
  s->set_tcp_retransmits(retransmits);
  s->set_tcp_segments_out(bytes / 9000 + 1);
  s->set_streams_ok(4);
  s->mutable_counters()->set_speed_mbps(speed_a);
  (*s->mutable_counters()->mutable_netdev())["tx_bytes"] = bytes + bytes / 50;
  v1::LinkReceiveResult* r = rx->add_results();
  r->set_interface(ifname);
  r->set_payload_bytes(bytes);
  r->set_seconds(5.0);
  r->set_connections(4);
  r->mutable_counters()->set_speed_mbps(speed_b);
  (*r->mutable_counters()->mutable_netdev())["rx_bytes"] = bytes + bytes / 50;
}

LinkPairPlan TwoHalves() {
  LinkPairPlan p;
  p.from_name = "a";
  p.to_name = "b";
  p.halves = {{"f0", "192.168.100.1", "f0", "192.168.100.2"}, {"f1", "192.168.101.1", "f1", "192.168.101.2"}};
  return p;
}

TEST(LinktestJudgeTest, CannedRepliesBecomeVerdicts) {
  v1::LinkSendResponse tx;
  v1::LinkReceiveSummary rx;
  tx.set_rdma("rdma: no devices");
  // Half f0: 150 Gb/s, clean, on a link one end reports at 200 Gb/s (the other end unknown).
  AddHalf(&tx, &rx, "f0", 150, 0, 200000, -1);
  // Half f1: 12 Gb/s, nothing lost: the host is not sending.
  AddHalf(&tx, &rx, "f1", 12, 0, 200000, 200000);
  LinkPairResult r = JudgeLinkPair(TwoHalves(), tx, rx);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.halves.size(), 2u);
  EXPECT_EQ(r.rdma, "rdma: no devices");
  EXPECT_EQ(r.halves[0].sample.speed_mbps, 200000) << "the known end's speed";
  EXPECT_DOUBLE_EQ(r.halves[0].sample.seconds, 5.0) << "the receiver's span, not the sender's 5.2 s";
  EXPECT_NEAR(r.halves[0].verdict.gbps, 150, 0.01);
  EXPECT_EQ(r.halves[0].verdict.kind, LinkVerdictKind::kHealthy);
  EXPECT_EQ(r.halves[1].verdict.kind, LinkVerdictKind::kHostNotSending);
  EXPECT_NEAR(r.total_gbps, 162, 0.01);

  // A management network in the same pair (1 Gb/s link) is not a sibling of the 200 Gb/s halves:
  // judged against its own link, it is healthy rather than "unused" next to them.
  {
    v1::LinkSendResponse tx3 = tx;
    v1::LinkReceiveSummary rx3 = rx;
    AddHalf(&tx3, &rx3, "eth0", 0.9, 0, 1000, 1000);
    LinkPairPlan three = TwoHalves();
    three.halves.push_back({"eth0", "10.0.0.5", "eth0", "10.0.0.6"});
    const LinkPairResult m = JudgeLinkPair(three, tx3, rx3);
    EXPECT_EQ(m.halves[2].verdict.kind, LinkVerdictKind::kHealthy) << m.halves[2].verdict.evidence[0];
    EXPECT_EQ(m.halves[1].verdict.kind, LinkVerdictKind::kHostNotSending);
  }

  // Retransmits on f1 make it dropped-on-path; a stream's failure is evidence, not a verdict.
  tx.mutable_results(1)->set_tcp_retransmits(tx.results(1).tcp_segments_out() / 20);
  tx.mutable_results(1)->set_error("connect to 192.168.101.2:4000: no answer within 5 s");
  r = JudgeLinkPair(TwoHalves(), tx, rx);
  EXPECT_EQ(r.halves[1].verdict.kind, LinkVerdictKind::kDroppedOnPath);
  EXPECT_EQ(r.halves[1].verdict.evidence.back(), "a stream failed: connect to 192.168.101.2:4000: no answer within 5 s");

  // No stream of a half ran: no-data, with the sender's reason.
  tx.mutable_results(1)->set_streams_ok(0);
  r = JudgeLinkPair(TwoHalves(), tx, rx);
  EXPECT_EQ(r.halves[1].verdict.kind, LinkVerdictKind::kNoData);
  EXPECT_NE(r.halves[1].verdict.evidence[0].find("no answer within 5 s"), std::string::npos);

  // Answers for the wrong number of interfaces: the pair failed.
  rx.mutable_results()->RemoveLast();
  r = JudgeLinkPair(TwoHalves(), tx, rx);
  EXPECT_NE(r.error.find("different number of interfaces"), std::string::npos);
  EXPECT_EQ(r.halves[0].verdict.kind, LinkVerdictKind::kNoData);
}

TEST(LinktestOutputTest, TableAndJsonCarryEveryHalf) {
  v1::LinkSendResponse tx;
  v1::LinkReceiveSummary rx;
  tx.set_rdma("rdma: no devices");
  AddHalf(&tx, &rx, "f0", 150, 0, 200000, 200000);
  AddHalf(&tx, &rx, "f1", 12, 0, 200000, 200000);
  LinktestReport report;
  report.duration_s = 5;
  report.streams = 4;
  report.pairs.push_back(JudgeLinkPair(TwoHalves(), tx, rx));
  LinkPairPlan failed = TwoHalves();
  failed.from_name = "b";
  failed.to_name = "a";
  failed.error = "on a: LinkReceive: unreachable";
  report.pairs.push_back(JudgeLinkPair(failed, v1::LinkSendResponse{}, v1::LinkReceiveSummary{}));
  EXPECT_FALSE(report.ok());

  const std::string table = FormatLinktestTable(report);
  EXPECT_NE(table.find("a -> b: 162.00 Gb/s total (rdma: no devices)"), std::string::npos) << table;
  EXPECT_NE(table.find("f0               f0                 150.000  healthy"), std::string::npos) << table;
  EXPECT_NE(table.find("f1               f1                  12.000  host-not-sending"), std::string::npos) << table;
  EXPECT_NE(table.find("      hint: "), std::string::npos);
  EXPECT_NE(table.find("b -> a: FAILED: on a: LinkReceive: unreachable"), std::string::npos) << table;
  EXPECT_NE(table.find("FAIL: 2 halves tested, 2 not healthy or failed"), std::string::npos) << table;

  const nlohmann::json j = nlohmann::json::parse(FormatLinktestJson(report));
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["streams"], 4);
  ASSERT_EQ(j["pairs"].size(), 2u);
  EXPECT_EQ(j["pairs"][0]["from"], "a");
  EXPECT_EQ(j["pairs"][0]["halves"][1]["verdict"], "host-not-sending");
  EXPECT_EQ(j["pairs"][0]["halves"][1]["peer_ipv4"], "192.168.101.2");
  EXPECT_GT(j["pairs"][0]["halves"][0]["evidence"].size(), 0u);
  EXPECT_EQ(j["pairs"][0]["halves"][0]["receiver_counters"]["netdev"]["rx_bytes"],
            rx.results(0).counters().netdev().at("rx_bytes"));
  EXPECT_EQ(j["pairs"][1]["error"], "on a: LinkReceive: unreachable");

  // Healthy and PCIe-bound halves pass; nothing tested does not.
  report.pairs.pop_back();
  report.pairs[0].halves[1].verdict.kind = LinkVerdictKind::kPcieBound;
  EXPECT_TRUE(report.ok());
  EXPECT_NE(FormatLinktestTable(report).find("PASS: 2 halves tested, 0 not healthy"), std::string::npos);
  report.pairs.clear();
  EXPECT_FALSE(report.ok());
}

// A half that ran RDMA WRITEs beside TCP shows their rate and the port and GID index chosen; a
// half that could not says why (the TCP figure stands).
TEST(LinktestOutputTest, RdmaHalvesShowRateOrReason) {
  v1::LinkSendResponse tx;
  v1::LinkReceiveSummary rx;
  AddHalf(&tx, &rx, "f0", 100, 0, 200000, 200000);
  AddHalf(&tx, &rx, "f1", 100, 0, 200000, 200000);
  v1::LinkRdmaResult* ran = tx.mutable_results(0)->mutable_rdma();
  ran->set_device("mlx5_0");
  ran->set_port(1);
  ran->set_gid_index(3);
  ran->set_bytes(uint64_t{60} << 30);
  ran->set_writes(61440);
  ran->set_seconds(5.0);
  (*ran->mutable_port_counters())["port_xmit_bytes"] = uint64_t{61} << 30;
  tx.mutable_results(1)->mutable_rdma()->set_error("rdma on f1: no RDMA device has a GID on f1; TCP only");
  rx.mutable_results(1)->mutable_rdma()->set_error("rdma on f1: no RDMA device has a GID on f1; TCP only");
  LinktestReport report;
  report.pairs.push_back(JudgeLinkPair(TwoHalves(), tx, rx));
  const std::string table = FormatLinktestTable(report);
  EXPECT_NE(table.find("rdma: 103.079 Gb/s over mlx5_0 port 1 GID index 3 (61440 writes in 5.00 s)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("      rdma on f1: no RDMA device has a GID on f1; TCP only\n"),
            std::string::npos)
      << table;
  const nlohmann::json j = nlohmann::json::parse(FormatLinktestJson(report));
  EXPECT_EQ(j["pairs"][0]["halves"][0]["rdma"]["gid_index"], 3);
  EXPECT_EQ(j["pairs"][0]["halves"][0]["rdma"]["sender_port_counters"]["port_xmit_bytes"], uint64_t{61} << 30);
  EXPECT_NEAR(j["pairs"][0]["halves"][0]["rdma"]["gbps"].get<double>(), 103.079, 1e-3);
  EXPECT_EQ(j["pairs"][0]["halves"][1]["rdma"]["receiver_error"], "rdma on f1: no RDMA device has a GID on f1; TCP only");

  // A TCP-only run has no rdma line or key.
  v1::LinkSendResponse tcp_tx;
  v1::LinkReceiveSummary tcp_rx;
  AddHalf(&tcp_tx, &tcp_rx, "f0", 100, 0, 200000, 200000);
  AddHalf(&tcp_tx, &tcp_rx, "f1", 100, 0, 200000, 200000);
  report.pairs = {JudgeLinkPair(TwoHalves(), tcp_tx, tcp_rx)};
  EXPECT_EQ(FormatLinktestTable(report).find("rdma:"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(FormatLinktestJson(report))["pairs"][0]["halves"][0].contains("rdma"));
}

TEST(LinktestFlagsTest, DurationsAndListsParseAsWritten) {
  auto parse = [](const std::vector<std::string>& args, LinktestCommandOptions* o) {
    CLI::App app("t");
    AddLinktestFlags(&app, o);
    return cli::ParseToStatus(app, args);
  };
  LinktestCommandOptions o;
  ASSERT_TRUE(parse({"--duration", "5s", "--streams", "8", "--interfaces", "a=f0,f1", "--timeout", "30", "--json"}, &o)
                  .ok());
  EXPECT_EQ(o.duration, std::chrono::milliseconds(5000));
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(30000));
  EXPECT_EQ(o.streams, 8);
  EXPECT_TRUE(o.json);
  EXPECT_EQ(o.interfaces, (std::vector<std::string>{"a=f0", "f1"}));
  LinktestCommandOptions d;
  EXPECT_EQ(d.duration, std::chrono::milliseconds(5000));
  EXPECT_EQ(d.streams, 4);
  EXPECT_FALSE(parse({"--duration", "500ms"}, &d).ok());
  EXPECT_FALSE(parse({"--duration", "61s"}, &d).ok());
  EXPECT_FALSE(parse({"--streams", "0"}, &d).ok());
  ASSERT_TRUE(parse({"--duration", "1500ms"}, &d).ok());
  EXPECT_EQ(d.duration, std::chrono::milliseconds(1500));
  EXPECT_EQ(d.transport, "");  // both where RDMA exists
  ASSERT_TRUE(parse({"--transport", "rdma"}, &d).ok());
  EXPECT_EQ(d.transport, "rdma");
  EXPECT_FALSE(parse({"--transport", "roce"}, &d).ok());
}

}  // namespace
}  // namespace tandem::controller
