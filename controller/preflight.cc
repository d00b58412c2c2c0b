#include "controller/preflight.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "controller/preflight_security.h"

namespace tandem::controller {

const char* CheckStatusName(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass: return "pass";
    case CheckStatus::kWarn: return "warn";
    case CheckStatus::kFail: return "fail";
  }
  return "?";
}

bool PreflightReport::ok() const { return Count(CheckStatus::kFail) == 0; }

int PreflightReport::Count(CheckStatus s) const {
  return static_cast<int>(std::count_if(checks.begin(), checks.end(), [s](const CheckResult& c) { return c.status == s; }));
}

namespace {

std::string Gib(uint64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }
std::string Gb(uint64_t bytes) {
  return bytes >= 1000000000ull ? absl::StrFormat("%.2f GB", bytes / 1e9) : absl::StrFormat("%.1f MB", bytes / 1e6);
}

bool IsRoceV2(const v1::GidEntry& e) {
  return absl::AsciiStrToLower(e.type()).find("v2") != std::string::npos;
}

// The port whose GID table NCCL uses: the first ACTIVE one, else the first.
const v1::RdmaPort* ChosenPort(const v1::RdmaDevice& device) {
  for (const auto& p : device.ports()) {
    if (absl::StrContains(p.state(), "ACTIVE")) return &p;
  }
  return device.ports().empty() ? nullptr : &device.ports(0);
}

std::string DescribeGid(const v1::GidEntry& e) {
  std::string ipv4;
  IsIpv4MappedGid(e.gid(), &ipv4);
  return absl::StrCat(e.type().empty() ? "unknown type" : e.type(), " ", ipv4.empty() ? e.gid() : ipv4);
}

// Netdevs of an HCA: device/net/*, else the ones named by its GID entries.
std::vector<std::string> HcaNetdevs(const v1::RdmaDevice& device) {
  std::vector<std::string> out(device.netdevs().begin(), device.netdevs().end());
  if (out.empty()) {
    std::set<std::string> seen;
    for (const auto& p : device.ports()) {
      for (const auto& g : p.gids()) {
        if (!g.netdev().empty() && seen.insert(g.netdev()).second) out.push_back(g.netdev());
      }
    }
  }
  return out;
}

const v1::RdmaDevice* FindDevice(const v1::NodeFacts& facts, const std::string& name) {
  for (const auto& d : facts.rdma()) {
    if (d.name() == name) return &d;
  }
  return nullptr;
}

const v1::NetDev* FindNetdev(const v1::NodeFacts& facts, const std::string& name) {
  for (const auto& n : facts.netdevs()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

std::string DescribeNetdev(const v1::NetDev& n) {
  std::string s = absl::StrCat(n.name(), " ", n.operstate().empty() ? "?" : n.operstate());
  if (!n.ipv4().empty()) absl::StrAppend(&s, " ", absl::StrJoin(n.ipv4(), ","));
  else absl::StrAppend(&s, " no-IPv4");
  if (n.mtu() > 0) absl::StrAppend(&s, " mtu ", n.mtu());
  if (n.speed_mbps() > 0) absl::StrAppend(&s, " ", n.speed_mbps(), " Mb/s");
  return s;
}

// --- Cross-node parity ---------------------------------------------------------------

struct ParityMember {
  std::string node;
  std::string key;    // compared for equality
  std::string shown;  // what the FOUND column says
};
// Extra words for FOUND when member `m` differs from member `ref` (e.g. the differing files).
using DiffFn = std::function<std::string(size_t m, size_t ref)>;

// Groups nodes by value. The reference is the strict majority value; without one (e.g. two
// nodes that differ) it is the first node's value and every node fails, because nothing says
// which side is wrong. Each failing row names the nodes on the other side.
void AddParityRows(const char* check, const std::vector<ParityMember>& members, const std::string& fix,
                   const DiffFn& diff, std::vector<CheckResult>* out) {
  if (members.empty()) return;
  std::vector<std::string> order;  // distinct keys, in order of first appearance
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < members.size(); ++i) {
    if (!groups.count(members[i].key)) order.push_back(members[i].key);
    groups[members[i].key].push_back(i);
  }
  if (groups.size() == 1) {
    for (const auto& m : members) {
      out->push_back({check, m.node, CheckStatus::kPass, m.shown,
                      members.size() > 1 ? absl::StrCat("same on all ", members.size(), " nodes")
                                         : "same on all nodes (only this one could be compared)", ""});
    }
    return;
  }
  size_t best = 0;
  int best_count = 0;
  for (const auto& k : order) best = std::max(best, groups[k].size());
  std::string ref_key;
  for (const auto& k : order) {
    if (groups[k].size() == best) ++best_count, ref_key = ref_key.empty() ? k : ref_key;
  }
  bool majority = best_count == 1;
  if (!majority) ref_key = members[0].key;
  auto nodes_of = [&](const std::string& key) {
    std::vector<std::string> names;
    for (size_t i : groups[key]) names.push_back(members[i].node);
    return absl::StrJoin(names, ", ");
  };
  for (size_t i = 0; i < members.size(); ++i) {
    const ParityMember& m = members[i];
    if (m.key == ref_key && majority) {
      out->push_back({check, m.node, CheckStatus::kPass, m.shown,
                      absl::StrCat("same on all nodes (this value is the majority reference)"), ""});
      continue;
    }
    // Compare against the reference; a reference node (no majority) compares against the first other group.
    std::string other_key = m.key != ref_key ? ref_key : *std::find_if(order.begin(), order.end(), [&](const std::string& k) { return k != ref_key; });
    size_t other = groups[other_key].front();
    std::string found = m.shown;
    std::string d = diff ? diff(i, other) : "";
    if (!d.empty()) absl::StrAppend(&found, "; ", d);
    std::string why = majority ? "reference: majority" : (m.key == ref_key ? "no majority: cannot tell which side is wrong"
                                                                               : "reference: first node; no majority");
    out->push_back({check, m.node, CheckStatus::kFail, found,
                    absl::StrCat(members[other].shown, " as on ", nodes_of(other_key), " (", why, ")"), fix});
  }
}

// Canonical text of a manifest for equality: every path with size, digest and error.
std::string ManifestKey(const v1::WeightsManifest& m) {
  std::string key;
  for (const auto& f : m.files()) absl::StrAppend(&key, f.path(), "\t", f.size(), "\t", f.sha256(), "\t", f.error(), "\n");
  return key;
}

// "differs: a, b; missing: c; extra: d; unreadable: e" of `m` against `ref`.
std::string DiffManifests(const v1::WeightsManifest& m, const v1::WeightsManifest& ref) {
  std::map<std::string, const v1::FileDigest*> mine, theirs;
  for (const auto& f : m.files()) mine[f.path()] = &f;
  for (const auto& f : ref.files()) theirs[f.path()] = &f;
  std::vector<std::string> differs, missing, extra, unreadable;
  for (const auto& [path, f] : mine) {
    if (!f->error().empty()) unreadable.push_back(absl::StrCat(path, " (", f->error(), ")"));
    auto it = theirs.find(path);
    if (it == theirs.end()) {
      extra.push_back(path);
    } else if (f->error().empty() && (f->sha256() != it->second->sha256() || f->size() != it->second->size())) {
      differs.push_back(path);
    }
  }
  for (const auto& [path, f] : theirs) {
    if (!mine.count(path)) missing.push_back(path);
  }
  std::vector<std::string> parts;
  if (!differs.empty()) parts.push_back("differs: " + absl::StrJoin(differs, ", "));
  if (!missing.empty()) parts.push_back("missing: " + absl::StrJoin(missing, ", "));
  if (!extra.empty()) parts.push_back("extra: " + absl::StrJoin(extra, ", "));
  if (!unreadable.empty()) parts.push_back("unreadable: " + absl::StrJoin(unreadable, ", "));
  return absl::StrJoin(parts, "; ");
}

// --- Per-node checks -------------------------------------------------------------------

struct GidOutcome {
  CheckResult row;
  std::vector<std::string> hcas;
  std::string gid_index;  // "" when not determined
};

GidOutcome CheckRoceGid(const NodeSpec& node, const v1::NodeFacts& facts) {
  GidOutcome out;
  out.row = {kCheckRoceGid, node.name, CheckStatus::kPass, "", "", ""};
  out.hcas = SelectHcas(node.nccl, facts);
  if (out.hcas.empty()) {
    out.row.status = CheckStatus::kWarn;
    out.row.found = facts.rdma().empty() ? "no RDMA devices" : "no RDMA device with an ACTIVE Ethernet port";
    if (!facts.rdma_error().empty()) absl::StrAppend(&out.row.found, " (", facts.rdma_error(), ")");
    out.row.expected = "an HCA for RoCE (nccl.hca not set: optional)";
    out.row.fix = "none needed for a test setup: NCCL/Gloo use the socket transport (slow for tensor parallel); "
                  "list the HCAs in nccl.hca to require RoCE";
    return out;
  }
  std::vector<std::string> found, problems, fixes;
  std::map<uint32_t, std::vector<std::string>> chosen;  // index -> HCAs
  const std::optional<int>& want = node.nccl.gid_index;
  for (const auto& name : out.hcas) {
    const v1::RdmaDevice* dev = FindDevice(facts, name);
    if (dev == nullptr) {
      std::vector<std::string> present;
      for (const auto& d : facts.rdma()) present.push_back(d.name());
      problems.push_back(absl::StrCat(name, ": not found (present: ", present.empty() ? "none" : absl::StrJoin(present, ", "), ")"));
      fixes.push_back("fix nccl.hca for this node (see `ls /sys/class/infiniband`)");
      continue;
    }
    std::optional<v1::GidEntry> best = FindRoceV2Ipv4Gid(*dev);
    if (want) {
      std::optional<v1::GidEntry> at = FindGidByIndex(*dev, static_cast<uint32_t>(*want));
      if (at && IsRoceV2(*at) && IsIpv4MappedGid(at->gid())) {
        chosen[*want].push_back(name);
        found.push_back(absl::StrCat(name, "=", *want, " (", DescribeGid(*at), ")"));
      } else {
        problems.push_back(absl::StrCat(name, ": index ", *want, " is ", at ? DescribeGid(*at) : "empty"));
        fixes.push_back(best ? absl::StrCat("set nccl.gid_index to ", best->index(), " or remove it (chosen automatically)")
                             : absl::StrCat("configure IPv4 on ", HcaNetdevs(*dev).empty() ? name + "'s netdev" : HcaNetdevs(*dev)[0]));
      }
      continue;
    }
    if (!best) {
      std::vector<std::string> nds = HcaNetdevs(*dev);
      std::string netdev = nds.empty() ? name + "'s netdev" : nds[0];
      problems.push_back(absl::StrCat(name, ": no RoCE v2 GID with an IPv4 address"));
      fixes.push_back(absl::StrCat("configure IPv4 on ", netdev));
      continue;
    }
    chosen[best->index()].push_back(name);
    found.push_back(absl::StrCat(name, "=", best->index(), " (", DescribeGid(*best), ")"));
  }
  out.row.expected = want ? absl::StrCat("index ", *want, " (nccl.gid_index) is RoCE v2 with IPv4 on every HCA")
                          : "a RoCE v2 GID with an IPv4-mapped address, same index on every HCA";
  if (problems.empty() && chosen.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [idx, names] : chosen) parts.push_back(absl::StrCat(absl::StrJoin(names, ","), "=", idx));
    problems.push_back(absl::StrCat("HCAs disagree (", absl::StrJoin(parts, " "), "); NCCL_IB_GID_INDEX is one number"));
    fixes.push_back("give every listed HCA's netdev the same address layout (e.g. the same IPv6 addresses or none), "
                    "or list only HCAs that agree in nccl.hca");
  }
  if (!problems.empty()) {
    out.row.status = CheckStatus::kFail;
    if (!found.empty()) problems.push_back(absl::StrJoin(found, ", "));
    out.row.found = absl::StrJoin(problems, "; ");
    out.row.fix = absl::StrJoin(fixes, "; ");
    return out;
  }
  out.row.found = absl::StrJoin(found, ", ");
  out.gid_index = absl::StrCat(chosen.begin()->first);
  return out;
}

CheckResult CheckHcaNetdevs(const NodeSpec& node, const v1::NodeFacts& facts, const std::vector<std::string>& hcas) {
  CheckResult row{kCheckHcaNetdevs, node.name, CheckStatus::kPass, "", "", ""};
  row.expected = "every HCA port ACTIVE; its netdevs up with IPv4 (both halves of a split port)";
  if (hcas.empty()) {
    row.found = "no HCA in use (socket transport)";
    row.expected = "-";
    return row;
  }
  std::vector<std::string> found, problems, fixes;
  for (const auto& name : hcas) {
    const v1::RdmaDevice* dev = FindDevice(facts, name);
    if (dev == nullptr) continue;  // reported by the GID check
    const v1::RdmaPort* port = ChosenPort(*dev);
    if (port == nullptr || !absl::StrContains(port->state(), "ACTIVE")) {
      problems.push_back(absl::StrCat(name, " port ", port ? absl::StrCat(port->port(), " is ", port->state()) : "missing"));
      fixes.push_back(absl::StrCat("check the cable and the link partner of ", name));
    }
    std::string pcie;
    if (!dev->pcie_link_speed().empty()) {
      pcie = absl::StrCat(" [PCIe ", dev->pcie_link_speed(), " x", dev->pcie_link_width());
      if (dev->pcie_gbps_ceiling() > 0) absl::StrAppend(&pcie, absl::StrFormat(" <= %.0f Gbit/s", dev->pcie_gbps_ceiling()));
      absl::StrAppend(&pcie, "]");
    }
    std::vector<std::string> nds = HcaNetdevs(*dev);
    if (nds.empty()) {
      problems.push_back(absl::StrCat(name, ": no netdev bound"));
      fixes.push_back(absl::StrCat("check the driver of ", name, " (mlx5_core) and `ip link`"));
    }
    for (const auto& nd : nds) {
      const v1::NetDev* n = FindNetdev(facts, nd);
      if (n == nullptr) {
        problems.push_back(absl::StrCat(name, ": netdev ", nd, " not found"));
        fixes.push_back(absl::StrCat("check `ip link show ", nd, "`"));
        continue;
      }
      found.push_back(absl::StrCat(name, ":", DescribeNetdev(*n), pcie));
      if (n->operstate() != "up") {
        problems.push_back(absl::StrCat(nd, " is ", n->operstate().empty() ? "in an unknown state" : n->operstate()));
        fixes.push_back(absl::StrCat("ip link set ", nd, " up"));
      }
      if (n->ipv4().empty()) {
        problems.push_back(absl::StrCat(nd, " has no IPv4 address"));
        fixes.push_back(absl::StrCat("configure IPv4 on ", nd, " (both logical interfaces of a split port need one)"));
      }
    }
  }
  if (!problems.empty()) {
    row.status = CheckStatus::kFail;
    row.found = absl::StrJoin(problems, "; ");
    row.fix = absl::StrJoin(fixes, "; ");
  } else {
    row.found = absl::StrJoin(found, ", ");
  }
  return row;
}

CheckResult CheckSocketIfname(const NodeSpec& node, const v1::NodeFacts& facts, const std::vector<std::string>& hcas,
                              std::string* chosen) {
  CheckResult row{kCheckSocketIfname, node.name, CheckStatus::kPass, "", "", ""};
  const std::string& want = node.nccl.socket_ifname;
  if (!want.empty()) {
    row.expected = absl::StrCat(want, " up with IPv4 (nccl.socket_ifname)");
    const v1::NetDev* n = FindNetdev(facts, want);
    if (n == nullptr) {
      std::vector<std::string> names;
      for (const auto& d : facts.netdevs()) names.push_back(d.name());
      row.status = CheckStatus::kFail;
      row.found = absl::StrCat(want, " not found (present: ", absl::StrJoin(names, ", "), ")");
      row.fix = "fix nccl.socket_ifname for this node";
      return row;
    }
    row.found = DescribeNetdev(*n);
    *chosen = want;
    std::vector<std::string> fixes;
    // Loopback always reports "unknown"; it is the right choice for agents on one machine.
    bool loopback_ok = want == "lo" && n->operstate() == "unknown";
    if (n->operstate() != "up" && !loopback_ok) {
      // Virtual interfaces may say "unknown" and still carry traffic.
      row.status = n->operstate() == "unknown" ? CheckStatus::kWarn : CheckStatus::kFail;
      fixes.push_back(absl::StrCat("ip link set ", want, " up"));
    }
    if (n->ipv4().empty()) {
      row.status = CheckStatus::kFail;
      fixes.push_back(absl::StrCat("configure IPv4 on ", want));
    }
    row.fix = absl::StrJoin(fixes, "; ");
    return row;
  }
  // Not configured: prefer an HCA netdev (same fabric as RoCE), else the first up interface with IPv4.
  row.expected = "an interface up with IPv4 (nccl.socket_ifname unset: chosen automatically)";
  std::vector<std::string> candidates;
  for (const auto& h : hcas) {
    if (const v1::RdmaDevice* d = FindDevice(facts, h)) {
      for (const auto& nd : HcaNetdevs(*d)) candidates.push_back(nd);
    }
  }
  for (const auto& n : facts.netdevs()) {
    if (n.name() != "lo") candidates.push_back(n.name());
  }
  for (const auto& c : candidates) {
    const v1::NetDev* n = FindNetdev(facts, c);
    if (n != nullptr && n->operstate() == "up" && !n->ipv4().empty()) {
      *chosen = c;
      row.found = absl::StrCat(DescribeNetdev(*n), " (auto)");
      return row;
    }
  }
  row.status = CheckStatus::kWarn;
  row.found = "no interface up with IPv4 besides lo";
  if (!facts.netdevs_error().empty()) absl::StrAppend(&row.found, " (", facts.netdevs_error(), ")");
  row.fix = "set nccl.socket_ifname to the interface the nodes reach each other on";
  return row;
}

CheckResult CheckMemory(const ClusterSpec& spec, const NodeSpec& node, const v1::MemoryFact& mem) {
  CheckResult row{kCheckMemory, node.name, CheckStatus::kPass, "", "", ""};
  uint64_t need = static_cast<uint64_t>(spec.memory_fraction * static_cast<double>(mem.total_bytes()));
  row.expected = absl::StrFormat("MemAvailable >= %.0f%% of MemTotal (%s; engine.memory_fraction)", spec.memory_fraction * 100, Gib(need));
  if (!mem.error().empty() || mem.total_bytes() == 0) {
    row.status = CheckStatus::kFail;
    row.found = absl::StrCat("memory not readable: ", mem.error().empty() ? "MemTotal is 0" : mem.error());
    row.fix = "check --procfs-root of the agent (meminfo)";
    return row;
  }
  row.found = absl::StrFormat("%s available of %s (%.0f%%)", Gib(mem.available_bytes()), Gib(mem.total_bytes()),
                              100.0 * mem.available_bytes() / mem.total_bytes());
  if (mem.available_bytes() < need) {
    row.fix = absl::StrCat("free ", Gib(need - mem.available_bytes()),
                           " (stop other GPU/model processes, `sync; echo 3 > /proc/sys/vm/drop_caches`) or lower engine.memory_fraction");
    if (spec.engine_backend == "cuda") {
      // With the cuda backend the fraction is of GPU memory (the KV pool is sized there at load);
      // host memory only matters where it is the GPU's memory too (unified memory, DGX Spark).
      row.status = CheckStatus::kWarn;
      absl::StrAppend(&row.fix, " (backend cuda: only matters with unified memory; the KV pool is sized from GPU memory)");
    } else {
      row.status = CheckStatus::kFail;
    }
  }
  return row;
}

CheckResult CheckSwap(const NodeSpec& node, const v1::MemoryFact& mem) {
  CheckResult row{kCheckSwap, node.name, CheckStatus::kPass, "", "swap off", ""};
  if (!mem.error().empty()) {
    row.status = CheckStatus::kWarn;
    row.found = "unknown (meminfo not readable)";
    return row;
  }
  if (mem.swap_total_bytes() > 0) {
    row.status = CheckStatus::kWarn;
    row.found = absl::StrCat("swap on: ", Gib(mem.swap_total_bytes()));
    row.fix = "swapoff -a (and drop it from /etc/fstab): swapped-out model memory stalls every step";
  } else {
    row.found = "swap off";
  }
  return row;
}

CheckResult CheckModelPresent(const NodeSpec& node, const v1::ModelFolderFact& model) {
  CheckResult row{kCheckModelPresent, node.name, CheckStatus::kPass, "", "", ""};
  row.expected = absl::StrCat(node.model_path, "/config.json present (each node needs the whole model)");
  std::string path = model.path().empty() ? node.model_path : model.path();
  if (absl::StartsWith(model.error(), "PERMISSION_DENIED")) {
    // The agent did not look: the path lies outside its --model-root folders.
    row.status = CheckStatus::kFail;
    row.found = absl::StrCat("refused by the agent: ", model.error());
    row.fix = absl::StrCat("keep the model under the agent's --model-root on ", node.name,
                           " (or add that folder with --model-root and restart the agent)");
  } else if (!model.exists()) {
    row.status = CheckStatus::kFail;
    row.found = absl::StrCat(path, " does not exist", model.error().empty() ? "" : absl::StrCat(" (", model.error(), ")"));
    row.fix = absl::StrCat("copy the model folder to ", path, " on ", node.name, " (or set nodes[].model_path)");
  } else if (!model.has_config()) {
    row.status = CheckStatus::kFail;
    row.found = absl::StrCat(path, " has no config.json", model.error().empty() ? "" : absl::StrCat(" (", model.error(), ")"));
    row.fix = absl::StrCat("copy the complete model folder (config.json, *.safetensors, tokenizer) to ", path);
  } else {
    row.found = absl::StrCat(path, ": ", model.file_count(), " files, ", Gb(model.total_bytes()));
  }
  return row;
}

}  // namespace

bool IsIpv4MappedGid(const std::string& gid, std::string* ipv4) {
  // 16 bytes as 8 groups of 4 hex digits: 0000:0000:0000:0000:0000:ffff:c0a8:0101.
  std::vector<std::string> groups = absl::StrSplit(gid, ':');
  if (groups.size() != 8) return false;
  for (int i = 0; i < 5; ++i) {
    if (groups[i].size() != 4 || groups[i] != "0000") return false;
  }
  if (absl::AsciiStrToLower(groups[5]) != "ffff" || groups[6].size() != 4 || groups[7].size() != 4) return false;
  unsigned hi = 0, lo = 0;
  if (sscanf(groups[6].c_str(), "%4x", &hi) != 1 || sscanf(groups[7].c_str(), "%4x", &lo) != 1) return false;
  if (ipv4 != nullptr) *ipv4 = absl::StrCat(hi >> 8, ".", hi & 0xff, ".", lo >> 8, ".", lo & 0xff);
  return true;
}

std::optional<v1::GidEntry> FindRoceV2Ipv4Gid(const v1::RdmaDevice& device) {
  const v1::RdmaPort* port = ChosenPort(device);
  if (port == nullptr) return std::nullopt;
  std::vector<v1::GidEntry> entries(port->gids().begin(), port->gids().end());
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.index() < b.index(); });
  for (const auto& e : entries) {
    if (e.error().empty() && IsRoceV2(e) && IsIpv4MappedGid(e.gid())) return e;
  }
  return std::nullopt;
}

std::optional<v1::GidEntry> FindGidByIndex(const v1::RdmaDevice& device, uint32_t index) {
  const v1::RdmaPort* port = ChosenPort(device);
  if (port == nullptr) return std::nullopt;
  for (const auto& e : port->gids()) {
    if (e.index() == index) return e;
  }
  return std::nullopt;
}

std::vector<std::string> SelectHcas(const NcclSpec& nccl, const v1::NodeFacts& facts) {
  if (nccl.hca) return *nccl.hca;
  std::vector<std::string> out;
  for (const auto& d : facts.rdma()) {
    for (const auto& p : d.ports()) {
      if (absl::StrContains(p.state(), "ACTIVE") && p.link_layer() == "Ethernet") {
        out.push_back(d.name());
        break;
      }
    }
  }
  return out;
}

PreflightReport ComparePreflight(const ClusterSpec& spec, const std::vector<NodeObservation>& observations,
                                 int64_t now_unix) {
  if (now_unix == 0) now_unix = static_cast<int64_t>(std::time(nullptr));
  PreflightReport report;
  std::vector<CheckResult>& rows = report.checks;
  const size_t n = std::min(spec.nodes.size(), observations.size());
  std::vector<size_t> up;  // nodes whose facts we have
  for (size_t i = 0; i < n; ++i) {
    const NodeSpec& node = spec.nodes[i];
    const auto& facts = observations[i].facts;
    if (!facts.ok()) {
      rows.push_back({kCheckAgentReachable, node.name, CheckStatus::kFail,
                      absl::StrCat(node.agent, ": ", StatusText(facts.status())),
                      absl::StrCat("tandem-agentd answering at ", node.agent),
                      absl::StrCat("start tandem-agentd on ", node.name, " (systemctl start tandem-agentd) or fix nodes[", i,
                                   "].agent")});
      continue;
    }
    up.push_back(i);
    CheckResult row{kCheckAgentReachable, node.name, CheckStatus::kPass,
                    absl::StrCat(node.agent, " (host ", facts->hostname(), ")"),
                    absl::StrCat("tandem-agentd answering at ", node.agent), ""};
    if (!facts->node_name().empty() && facts->node_name() != node.name) {
      row.status = CheckStatus::kWarn;
      absl::StrAppend(&row.found, "; agent calls itself \"", facts->node_name(), "\"");
      row.fix = "check that nodes[].agent points at the right machine, or fix the agent's --node-name";
    }
    rows.push_back(row);
    rows.push_back(CheckAgentSecurity(node, *facts, now_unix));
  }
  if (!spec.nodes.empty()) rows.push_back(CheckApiAuth(spec));

  // Parity across the nodes we could reach.
  std::vector<ParityMember> driver, kernel, build;
  bool any_driver = false;
  for (size_t i : up) {
    const v1::NodeFacts& f = *observations[i].facts;
    const std::string& name = spec.nodes[i].name;
    // The agent reports a node without any driver file as an error starting "no NVIDIA driver";
    // that is a fact (no driver), not a read failure.
    bool no_driver = f.driver().version().empty() &&
                     (f.driver().error().empty() || absl::StartsWith(f.driver().error(), "no NVIDIA driver"));
    if (no_driver) {
      driver.push_back({name, "", "no NVIDIA driver"});
    } else if (!f.driver().error().empty()) {
      driver.push_back({name, "error:" + f.driver().error(), "unreadable: " + f.driver().error()});
    } else {
      any_driver = any_driver || !f.driver().version().empty();
      driver.push_back({name, f.driver().version(), f.driver().version().empty() ? "no NVIDIA driver" : f.driver().version()});
    }
    kernel.push_back(f.kernel().error().empty() ? ParityMember{name, f.kernel().release(), f.kernel().release()}
                                                : ParityMember{name, "error:" + f.kernel().error(), "unreadable: " + f.kernel().error()});
    const v1::AgentBuild& b = f.build();
    std::string shown = absl::StrCat("tandem ", b.version(), " sha256:", b.binary_sha256().substr(0, 12));
    if (!b.image_digest().empty()) absl::StrAppend(&shown, " image ", b.image_digest());
    if (!b.error().empty()) absl::StrAppend(&shown, " (", b.error(), ")");
    build.push_back({name, absl::StrCat(b.version(), "|", b.binary_sha256(), "|", b.image_digest(), "|", b.error()), shown});
  }
  size_t first_driver = rows.size();
  AddParityRows(kCheckDriverParity, driver, "install the same NVIDIA driver version on every node (then reboot)", nullptr, &rows);
  if (!any_driver && spec.engine_backend != "cpu") {
    // Parity holds (no node has one), but a GPU cluster without a driver will not serve.
    for (size_t r = first_driver; r < rows.size(); ++r) {
      if (rows[r].status == CheckStatus::kPass) {
        rows[r].status = CheckStatus::kWarn;
        rows[r].fix = "install the NVIDIA driver (same version on every node) before serving on GPUs";
      }
    }
  }
  AddParityRows(kCheckKernelParity, kernel, "run the same kernel on every node (apt upgrade + reboot the odd one)", nullptr, &rows);
  AddParityRows(kCheckBuildParity, build, "deploy the same tandem-agentd build on every node and restart it", nullptr, &rows);

  for (size_t i : up) rows.push_back(CheckModelPresent(spec.nodes[i], observations[i].facts->model()));

  // Weights: nodes with a manifest take part in parity; the others get their own row.
  std::vector<ParityMember> weights;
  std::vector<const v1::WeightsManifest*> manifests;
  for (size_t i : up) {
    const NodeSpec& node = spec.nodes[i];
    const auto& m = observations[i].manifest;
    if (!m) {
      rows.push_back({kCheckWeightsParity, node.name, CheckStatus::kWarn,
                      absl::StrCat("not compared: ", observations[i].manifest_skipped_reason.empty() ? "not hashed"
                                                                                                     : observations[i].manifest_skipped_reason),
                      "same sha256 for every file on every node", ""});
      continue;
    }
    // Not comparable: the agent could not hash the folder (the RPC's status) or could not list
    // a sub-folder of it (the manifest's error: the files under it are missing).
    if (!m->ok() || !(*m)->error().empty()) {
      std::string err = m->ok() ? (*m)->error() : StatusText(m->status());
      rows.push_back({kCheckWeightsParity, node.name, CheckStatus::kFail, absl::StrCat("hashing failed: ", err),
                      "same sha256 for every file on every node", absl::StrCat("check ", node.model_path, " on ", node.name)});
      continue;
    }
    manifests.push_back(&**m);
    weights.push_back({node.name, ManifestKey(**m), absl::StrCat((*m)->files_size(), " files, ", Gb((*m)->total_bytes()))});
  }
  AddParityRows(kCheckWeightsParity, weights, "copy the model folder again from a good node (rsync -a --checksum)",
                [&](size_t a, size_t b) { return DiffManifests(*manifests[a], *manifests[b]); }, &rows);

  for (size_t i : up) {
    const NodeSpec& node = spec.nodes[i];
    const v1::NodeFacts& f = *observations[i].facts;
    GidOutcome gid = CheckRoceGid(node, f);
    rows.push_back(gid.row);
    rows.push_back(CheckHcaNetdevs(node, f, gid.hcas));
    std::string ifname;
    rows.push_back(CheckSocketIfname(node, f, gid.hcas, &ifname));
    rows.push_back(CheckMemory(spec, node, f.memory()));
    rows.push_back(CheckSwap(node, f.memory()));

    auto& env = report.nccl_env[node.name];
    env["NCCL_IB_HCA"] = absl::StrJoin(gid.hcas, ",");
    env["NCCL_IB_GID_INDEX"] = gid.gid_index;
    env["NCCL_SOCKET_IFNAME"] = ifname;
    env["GLOO_SOCKET_IFNAME"] = ifname;
    if (gid.hcas.empty()) env["NCCL_IB_DISABLE"] = "1";  // no HCA: say so rather than let NCCL probe
  }
  // Group rows by check (stable: nodes stay in spec order) so the table reads check by check.
  static const char* const kOrder[] = {kCheckAgentReachable, kCheckAgentSecurity, kCheckApiAuth, kCheckDriverParity, kCheckKernelParity, kCheckBuildParity,
                                       kCheckModelPresent,   kCheckWeightsParity, kCheckRoceGid,     kCheckHcaNetdevs,
                                       kCheckSocketIfname,   kCheckMemory,        kCheckSwap};
  auto rank = [](const std::string& c) {
    for (size_t k = 0; k < std::size(kOrder); ++k) {
      if (c == kOrder[k]) return k;
    }
    return std::size(kOrder);
  };
  auto node_rank = [&](const std::string& name) {
    for (size_t k = 0; k < spec.nodes.size(); ++k) {
      if (spec.nodes[k].name == name) return k;
    }
    return spec.nodes.size();
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const CheckResult& a, const CheckResult& b) {
    if (rank(a.check) != rank(b.check)) return rank(a.check) < rank(b.check);
    return node_rank(a.node) < node_rank(b.node);
  });
  return report;
}

}  // namespace tandem::controller
