// The pure part of `tandemctl linktest` (docs/linktest.md): which interfaces of which node pair
// up, how both agents' replies become one verdict per half (agentd/link_verdict.h), and the
// table and JSON. No network here, so every case runs from canned agent replies.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agentd/link_verdict.h"
#include "controller/cluster_spec.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

// One half of an ordered node pair: the sender's interface and address, the receiver's.
struct LinkHalfPlan {
  std::string interface;
  std::string ipv4;
  std::string peer_interface;
  std::string peer_ipv4;
};

struct LinkPairPlan {
  size_t from = 0, to = 0;  // indexes into spec.nodes
  std::string from_name, to_name;
  std::vector<LinkHalfPlan> halves;
  std::string error;  // why this pair cannot be tested ("" when halves were found)
};

// The interfaces each node tests, one list per spec.nodes entry (empty: chosen from its facts).
// `flag` is --interfaces: "IF" entries apply to every node, "NODE=IF" to one; given for a node,
// they replace its nodes[].linktest.interfaces. InvalidArgument naming an unknown node.
absl::StatusOr<std::vector<std::vector<std::string>>> LinkInterfaceLists(const ClusterSpec& spec,
                                                                         const std::vector<std::string>& flag);

// Every ordered pair (A, B) of nodes. A's interfaces: its list, else every interface that is not
// down and has an IPv4 (loopback only when every agent address is a loopback address, and then
// only loopback). A half is such an interface of A with an address whose subnet holds an IPv4
// of one of B's interfaces (each of B's interfaces serves at most one half). `facts[i]` belongs
// to spec.nodes[i]; a node without facts fails its pairs.
std::vector<LinkPairPlan> PlanLinkPairs(const ClusterSpec& spec,
                                        const std::vector<absl::StatusOr<v1::NodeFacts>>& facts,
                                        const std::vector<std::vector<std::string>>& lists);

struct LinkHalfResult {
  LinkHalfPlan plan;
  agentd::HalfSample sample;
  agentd::LinkVerdict verdict;
  uint64_t bytes_sent = 0;
  // The half's RDMA WRITE transfer, when it ran or was tried (agentd/link_rdma.h): the sender's
  // figures, and the receiver's error and port counters.
  bool has_rdma = false;
  v1::LinkRdmaResult rdma;
  v1::LinkRdmaResult peer_rdma;
};

struct LinkPairResult {
  std::string from, to;
  std::vector<LinkHalfResult> halves;
  double total_gbps = 0;
  std::string rdma;   // the sender's RDMA line
  std::string error;  // the pair could not run (plan, facts or RPC failure)
};

// Both ends' replies to one pair's transfer, judged half by half; each half is compared with the
// fastest other half of the same pair on a link of the same speed (unknown counts as a speed).
LinkPairResult JudgeLinkPair(const LinkPairPlan& plan, const absl::StatusOr<v1::LinkSendResponse>& sent,
                             const absl::StatusOr<v1::LinkReceiveSummary>& received);

struct LinktestReport {
  double duration_s = 0;
  int streams = 0;
  std::vector<LinkPairResult> pairs;
  double wall_s = 0;
  // Every pair ran and every half is healthy or PCIe bound (as fast as its own PCIe link lets
  // it: what a CX-7 half on a DGX Spark should be).
  bool ok() const;
};

std::string FormatLinktestTable(const LinktestReport& report);
std::string FormatLinktestJson(const LinktestReport& report);

}  // namespace tandem::controller
