#include "controller/linktest_plan.h"

#include <arpa/inet.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/net_address.h"

namespace tandem::controller {
namespace {

struct Address {
  std::string interface;
  std::string ipv4;
  uint32_t host = 0;  // host byte order
  int prefix = 32;
  bool loopback = false;
};

// "a.b.c.d/nn" (NetDev.ipv4) into an Address; false when malformed.
bool ParseCidr(const std::string& interface, const std::string& cidr, Address* out) {
  const size_t slash = cidr.find('/');
  out->interface = interface;
  out->ipv4 = cidr.substr(0, slash);
  in_addr a{};
  if (inet_pton(AF_INET, out->ipv4.c_str(), &a) != 1) return false;
  out->host = ntohl(a.s_addr);
  out->prefix = slash == std::string::npos ? 32 : std::atoi(cidr.c_str() + slash + 1);
  if (out->prefix < 0 || out->prefix > 32) return false;
  out->loopback = interface == "lo" || (out->host >> 24) == 127;
  return true;
}

bool InSubnet(const Address& net, uint32_t host) {
  const uint32_t mask = net.prefix == 0 ? 0 : ~0u << (32 - net.prefix);
  return (net.host & mask) == (host & mask);
}

// The addresses a node tests from: its list, or the automatic choice. `missing` gets the names
// on the list that have no IPv4 on the node.
std::vector<Address> Candidates(const v1::NodeFacts& facts, const std::vector<std::string>& list, bool loopback_cluster,
                                std::vector<std::string>* missing) {
  std::vector<Address> out;
  std::set<std::string> found;
  for (const v1::NetDev& d : facts.netdevs()) {
    const bool listed = std::find(list.begin(), list.end(), d.name()) != list.end();
    if (!list.empty() && !listed) continue;
    if (list.empty() && d.operstate() == "down") continue;
    for (const std::string& cidr : d.ipv4()) {
      Address a;
      if (!ParseCidr(d.name(), cidr, &a)) continue;
      if (list.empty() && a.loopback != loopback_cluster) continue;
      found.insert(d.name());
      out.push_back(a);
    }
  }
  for (const std::string& name : list) {
    if (!found.count(name)) missing->push_back(name);
  }
  return out;
}

double Gbps(uint64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) * 8.0 / seconds / 1e9 : 0; }

std::map<std::string, uint64_t> ToMap(const google::protobuf::Map<std::string, uint64_t>& m) {
  return std::map<std::string, uint64_t>(m.begin(), m.end());
}

// The smaller of two values of which either may be unknown (<= 0).
template <typename T>
T KnownMin(T a, T b, T unknown) {
  if (a <= 0) return b > 0 ? b : unknown;
  if (b <= 0) return a;
  return std::min(a, b);
}

}  // namespace

absl::StatusOr<std::vector<std::vector<std::string>>> LinkInterfaceLists(const ClusterSpec& spec,
                                                                         const std::vector<std::string>& flag) {
  std::vector<std::vector<std::string>> lists;
  for (const NodeSpec& n : spec.nodes) lists.push_back(n.linktest_interfaces);
  std::vector<std::vector<std::string>> from_flag(spec.nodes.size());
  for (const std::string& entry : flag) {
    const size_t eq = entry.find('=');
    const std::string name = eq == std::string::npos ? entry : entry.substr(eq + 1);
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("--interfaces: empty interface in \"", entry, "\""));
    if (eq == std::string::npos) {
      for (auto& l : from_flag) l.push_back(name);
      continue;
    }
    const std::string node = entry.substr(0, eq);
    auto it = std::find_if(spec.nodes.begin(), spec.nodes.end(), [&](const NodeSpec& n) { return n.name == node; });
    if (it == spec.nodes.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--interfaces: no node \"", node, "\" in ", spec.file));
    }
    from_flag[it - spec.nodes.begin()].push_back(name);
  }
  for (size_t i = 0; i < lists.size(); ++i) {
    if (!from_flag[i].empty()) lists[i] = from_flag[i];
  }
  return lists;
}

std::vector<LinkPairPlan> PlanLinkPairs(const ClusterSpec& spec,
                                        const std::vector<absl::StatusOr<v1::NodeFacts>>& facts,
                                        const std::vector<std::vector<std::string>>& lists) {
  const bool loopback_cluster = std::all_of(spec.nodes.begin(), spec.nodes.end(),
                                            [](const NodeSpec& n) { return IsLoopbackHost(n.agent); });
  std::vector<std::vector<Address>> cand(spec.nodes.size());
  std::vector<std::string> node_error(spec.nodes.size());
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    if (!facts[i].ok()) {
      node_error[i] = absl::StrCat(spec.nodes[i].name, ": ", facts[i].status().message());
      continue;
    }
    std::vector<std::string> missing;
    cand[i] = Candidates(*facts[i], lists[i], loopback_cluster, &missing);
    if (!missing.empty()) {
      node_error[i] = absl::StrCat(spec.nodes[i].name, " has no IPv4 on ", absl::StrJoin(missing, ", "),
                                   " (linktest interfaces)");
    }
  }
  std::vector<LinkPairPlan> plans;
  for (size_t a = 0; a < spec.nodes.size(); ++a) {
    for (size_t b = 0; b < spec.nodes.size(); ++b) {
      if (a == b) continue;
      LinkPairPlan p;
      p.from = a;
      p.to = b;
      p.from_name = spec.nodes[a].name;
      p.to_name = spec.nodes[b].name;
      if (!node_error[a].empty() || !node_error[b].empty()) {
        p.error = !node_error[a].empty() ? node_error[a] : node_error[b];
        plans.push_back(std::move(p));
        continue;
      }
      std::set<std::string> used_a, used_b;
      for (const Address& x : cand[a]) {
        if (used_a.count(x.interface)) continue;
        for (const Address& y : cand[b]) {
          if (used_b.count(y.interface) || !InSubnet(x, y.host)) continue;
          // Two nodes never share an address, except loopback on one host (the CPU test clusters).
          if (x.host == y.host && !x.loopback) continue;
          p.halves.push_back({x.interface, x.ipv4, y.interface, y.ipv4});
          used_a.insert(x.interface);
          used_b.insert(y.interface);
          break;
        }
      }
      if (p.halves.empty()) {
        p.error = absl::StrCat("no interface of ", p.from_name, " shares a subnet with one of ", p.to_name,
                               " (set nodes[].linktest.interfaces or --interfaces)");
      }
      plans.push_back(std::move(p));
    }
  }
  return plans;
}

LinkPairResult JudgeLinkPair(const LinkPairPlan& plan, const absl::StatusOr<v1::LinkSendResponse>& sent,
                             const absl::StatusOr<v1::LinkReceiveSummary>& received) {
  LinkPairResult out;
  out.from = plan.from_name;
  out.to = plan.to_name;
  if (!plan.error.empty()) {
    out.error = plan.error;
    return out;
  }
  if (!sent.ok()) {
    out.error = absl::StrCat("LinkSend on ", plan.from_name, ": ", sent.status().message());
  } else if (!received.ok()) {
    out.error = absl::StrCat("LinkReceive on ", plan.to_name, ": ", received.status().message());
  } else if (sent->results_size() != static_cast<int>(plan.halves.size()) ||
             received->results_size() != static_cast<int>(plan.halves.size())) {
    out.error = "the agents answered for a different number of interfaces than asked";
  }
  if (sent.ok()) out.rdma = sent->rdma();
  for (size_t i = 0; i < plan.halves.size(); ++i) {
    LinkHalfResult h;
    h.plan = plan.halves[i];
    agentd::HalfSample& s = h.sample;
    s.interface = h.plan.interface;
    s.peer_interface = h.plan.peer_interface;
    if (!out.error.empty()) {
      s.error = out.error;
    } else {
      const v1::LinkSendResult& tx = sent->results(static_cast<int>(i));
      const v1::LinkReceiveResult& rx = received->results(static_cast<int>(i));
      h.bytes_sent = tx.bytes_sent();
      h.has_rdma = tx.has_rdma();
      h.rdma = tx.rdma();
      h.peer_rdma = rx.rdma();
      s.payload_bytes = rx.payload_bytes();
      // The receiver's first-to-last byte span is the transfer; the sender's clock (start to the
      // receiver's close) stands in when the receiver saw a single read.
      s.seconds = rx.seconds() > 0 ? rx.seconds() : tx.seconds();
      s.tcp_retransmits = tx.tcp_retransmits();
      s.tcp_segments_out = tx.tcp_segments_out();
      s.sender_netdev = ToMap(tx.counters().netdev());
      s.sender_ethtool = ToMap(tx.counters().ethtool());
      s.receiver_netdev = ToMap(rx.counters().netdev());
      s.receiver_ethtool = ToMap(rx.counters().ethtool());
      s.speed_mbps = KnownMin<int64_t>(tx.counters().speed_mbps(), rx.counters().speed_mbps(), -1);
      s.pcie_gbps_ceiling = KnownMin<double>(tx.counters().pcie_gbps_ceiling(), rx.counters().pcie_gbps_ceiling(), 0);
      if (tx.streams_ok() == 0) {
        s.error = tx.error().empty() ? "no stream ran" : tx.error();
      } else if (rx.connections() == 0) {
        s.error = rx.error().empty() ? "the receiver accepted no stream" : rx.error();
      }
    }
    out.halves.push_back(std::move(h));
  }
  for (size_t i = 0; i < out.halves.size(); ++i) {
    // A half is compared with its siblings: the other halves on links of the same speed (the two
    // halves of one CX-7 port), not with a management network that happens to share the pair.
    double best_other = 0;
    for (size_t j = 0; j < out.halves.size(); ++j) {
      const agentd::HalfSample& o = out.halves[j].sample;
      if (j != i && o.error.empty() && o.speed_mbps == out.halves[i].sample.speed_mbps) {
        best_other = std::max(best_other, Gbps(o.payload_bytes, o.seconds));
      }
    }
    LinkHalfResult& h = out.halves[i];
    h.verdict = agentd::JudgeHalf(h.sample, best_other);
    if (sent.ok() && out.error.empty() && h.sample.error.empty()) {
      const v1::LinkSendResult& tx = sent->results(static_cast<int>(i));
      if (!tx.error().empty()) h.verdict.evidence.push_back("a stream failed: " + tx.error());
      const std::string& rx_error = received->results(static_cast<int>(i)).error();
      if (!rx_error.empty()) h.verdict.evidence.push_back("receiver: " + rx_error);
      if (tx.counters().error().size()) h.verdict.evidence.push_back("sender counters: " + tx.counters().error());
    }
    out.total_gbps += h.verdict.gbps;
  }
  return out;
}

namespace {

// A half passes when it is healthy or as fast as its own PCIe link lets it be.
bool HalfPassed(const LinkHalfResult& h) {
  return h.verdict.kind == agentd::LinkVerdictKind::kHealthy || h.verdict.kind == agentd::LinkVerdictKind::kPcieBound;
}

}  // namespace

bool LinktestReport::ok() const {
  if (pairs.empty()) return false;
  for (const LinkPairResult& p : pairs) {
    if (!p.error.empty() || !std::all_of(p.halves.begin(), p.halves.end(), HalfPassed)) return false;
  }
  return true;
}

namespace {

// "rdma: 103.079 Gb/s over mlx5_0 port 1 GID index 3 (...)", or why it did not run.
std::string DescribeRdmaHalf(const LinkHalfResult& h) {
  const v1::LinkRdmaResult& r = h.rdma;
  if (r.writes() == 0 && !r.error().empty()) {
    return absl::StartsWith(r.error(), "rdma") ? r.error() : "rdma: " + r.error();
  }
  std::string line = absl::StrFormat("rdma: %.3f Gb/s", Gbps(r.bytes(), r.seconds()));
  if (!r.device().empty()) absl::StrAppend(&line, " over ", r.device(), " port ", r.port(), " GID index ", r.gid_index());
  absl::StrAppend(&line, " (", r.writes(), " writes in ", absl::StrFormat("%.2f", r.seconds()), " s)");
  if (!r.error().empty()) absl::StrAppend(&line, "; ", r.error());
  if (!h.peer_rdma.error().empty() && h.peer_rdma.error() != r.error()) {
    absl::StrAppend(&line, "; receiver: ", h.peer_rdma.error());
  }
  return line;
}

}  // namespace

std::string FormatLinktestTable(const LinktestReport& r) {
  std::string out = absl::StrFormat("linktest: %.1f s per pair, %d streams per interface, every interface of a pair at once\n",
                                    r.duration_s, r.streams);
  int bad = 0, halves = 0;
  for (const LinkPairResult& p : r.pairs) {
    absl::StrAppend(&out, "\n", p.from, " -> ", p.to);
    if (!p.error.empty()) {
      absl::StrAppend(&out, ": FAILED: ", p.error, "\n");
      ++bad;
      continue;
    }
    absl::StrAppendFormat(&out, ": %.2f Gb/s total%s\n", p.total_gbps, p.rdma.empty() ? "" : " (" + p.rdma + ")");
    absl::StrAppendFormat(&out, "  %-16s %-16s %9s  %s\n", "INTERFACE", "PEER", "GB/S", "VERDICT");
    for (const LinkHalfResult& h : p.halves) {
      ++halves;
      if (!HalfPassed(h)) ++bad;
      absl::StrAppendFormat(&out, "  %-16s %-16s %9.3f  %s\n", h.plan.interface, h.plan.peer_interface, h.verdict.gbps,
                            agentd::LinkVerdictName(h.verdict.kind));
      for (const std::string& e : h.verdict.evidence) absl::StrAppend(&out, "      ", e, "\n");
      if (h.has_rdma) absl::StrAppend(&out, "      ", DescribeRdmaHalf(h), "\n");
      if (!h.verdict.hint.empty()) absl::StrAppend(&out, "      hint: ", h.verdict.hint, "\n");
    }
  }
  absl::StrAppendFormat(&out, "\n%s: %d halves tested, %d not healthy or failed (%.1f s)\n", r.ok() ? "PASS" : "FAIL",
                        halves, bad, r.wall_s);
  return out;
}

std::string FormatLinktestJson(const LinktestReport& r) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const LinkPairResult& p : r.pairs) {
    nlohmann::json halves = nlohmann::json::array();
    for (const LinkHalfResult& h : p.halves) {
      const agentd::HalfSample& s = h.sample;
      halves.push_back({{"interface", h.plan.interface},
                        {"ipv4", h.plan.ipv4},
                        {"peer_interface", h.plan.peer_interface},
                        {"peer_ipv4", h.plan.peer_ipv4},
                        {"gbps", h.verdict.gbps},
                        {"verdict", agentd::LinkVerdictName(h.verdict.kind)},
                        {"evidence", h.verdict.evidence},
                        {"hint", h.verdict.hint},
                        {"bytes_sent", h.bytes_sent},
                        {"payload_bytes", s.payload_bytes},
                        {"seconds", s.seconds},
                        {"tcp_retransmits", s.tcp_retransmits},
                        {"tcp_segments_out", s.tcp_segments_out},
                        {"speed_mbps", s.speed_mbps},
                        {"pcie_gbps_ceiling", s.pcie_gbps_ceiling},
                        {"fec_corrected_bits", h.verdict.fec_corrected_bits},
                        {"ber", h.verdict.ber},
                        {"sender_counters", {{"netdev", s.sender_netdev}, {"ethtool", s.sender_ethtool}}},
                        {"receiver_counters", {{"netdev", s.receiver_netdev}, {"ethtool", s.receiver_ethtool}}},
                        {"error", s.error}});
      if (h.has_rdma) {
        halves.back()["rdma"] = {{"device", h.rdma.device()},
                                 {"port", h.rdma.port()},
                                 {"gid_index", h.rdma.gid_index()},
                                 {"gbps", Gbps(h.rdma.bytes(), h.rdma.seconds())},
                                 {"bytes", h.rdma.bytes()},
                                 {"writes", h.rdma.writes()},
                                 {"seconds", h.rdma.seconds()},
                                 {"error", h.rdma.error()},
                                 {"receiver_error", h.peer_rdma.error()},
                                 {"sender_port_counters", ToMap(h.rdma.port_counters())},
                                 {"receiver_port_counters", ToMap(h.peer_rdma.port_counters())}};
      }
    }
    pairs.push_back({{"from", p.from},
                     {"to", p.to},
                     {"total_gbps", p.total_gbps},
                     {"rdma", p.rdma},
                     {"error", p.error},
                     {"halves", halves}});
  }
  nlohmann::json j = {{"ok", r.ok()},
                      {"duration_s", r.duration_s},
                      {"streams", r.streams},
                      {"wall_s", r.wall_s},
                      {"pairs", pairs}};
  return j.dump(2) + "\n";
}

}  // namespace tandem::controller
