// Hand-built facts for the preflight tests (no agents, no network): two DGX Spark nodes whose
// facts agree, the cluster.yaml over them, their weight manifests, and the row lookup. Shared by
// preflight_test (the comparison), preflight_security_test and preflight_output_test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/cluster_spec.h"
#include "controller/preflight.h"

namespace tandem::controller::testing {

// How the GID table of a node's HCA is laid out (AddHca).
enum class Layout { kDgxSpark, kWithIpv6, kNoIpv4 };

// A GID entry; `addr` is the last 4 groups for IPv4-mapped ones ("ffff:c0a8:6401").
inline void AddGid(v1::RdmaPort* port, uint32_t index, const std::string& gid, const std::string& type, const std::string& netdev) {
  v1::GidEntry* e = port->add_gids();
  e->set_index(index);
  e->set_gid(gid);
  e->set_type(type);
  e->set_netdev(netdev);
}

// A GID table like the kernel's on a DGX Spark CX-7 port: link-local v1/v2 at 0/1, then
// (optionally) a global IPv6 address v1/v2, then the IPv4-mapped address v1/v2.
inline void AddHca(v1::NodeFacts* f, const std::string& name, const std::string& netdev, const std::string& ipv4_hex,
            const std::string& ipv4, Layout layout) {
  v1::RdmaDevice* d = f->add_rdma();
  d->set_name(name);
  d->add_netdevs(netdev);
  d->set_pci_address("0000:01:00.0");
  v1::RdmaPort* p = d->add_ports();
  p->set_port(1);
  p->set_state("4: ACTIVE");
  p->set_phys_state("5: LinkUp");
  p->set_link_layer("Ethernet");
  uint32_t i = 0;
  AddGid(p, i++, "fe80:0000:0000:0000:4e26:1234:5678:9abc", "IB/RoCE v1", netdev);
  AddGid(p, i++, "fe80:0000:0000:0000:4e26:1234:5678:9abc", "RoCE v2", netdev);
  if (layout == Layout::kWithIpv6) {
    AddGid(p, i++, "2001:0db8:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", netdev);
    AddGid(p, i++, "2001:0db8:0000:0000:0000:0000:0000:0001", "RoCE v2", netdev);
  }
  if (layout != Layout::kNoIpv4) {
    AddGid(p, i++, "0000:0000:0000:0000:0000:ffff:" + ipv4_hex, "IB/RoCE v1", netdev);
    AddGid(p, i++, "0000:0000:0000:0000:0000:ffff:" + ipv4_hex, "RoCE v2", netdev);
  }
  v1::NetDev* n = f->add_netdevs();
  n->set_name(netdev);
  n->set_operstate("up");
  n->set_mtu(9000);
  n->set_speed_mbps(200000);
  if (layout != Layout::kNoIpv4) n->add_ipv4(ipv4 + "/24");
}

inline constexpr int64_t kNow = 1800000000;  // a fixed "now" for certificate expiry

inline v1::NodeFacts SparkFacts(const std::string& name, Layout layout0 = Layout::kDgxSpark, Layout layout1 = Layout::kDgxSpark) {
  v1::NodeFacts f;
  f.set_node_name(name);
  f.set_hostname(name);
  f.mutable_build()->set_version("0.1.0");
  f.mutable_build()->set_binary_sha256(std::string(64, 'a'));
  f.mutable_driver()->set_version("580.95.05");
  f.mutable_kernel()->set_release("6.11.0-1016-nvidia");
  f.mutable_memory()->set_total_bytes(128ull << 30);
  f.mutable_memory()->set_available_bytes(120ull << 30);
  AddHca(&f, "rocep1s0f0", "enp1s0f0np0", "c0a8:6401", "192.168.100.1", layout0);
  AddHca(&f, "rocep1s0f1", "enp1s0f1np1", "c0a8:6501", "192.168.101.1", layout1);
  v1::NetDev* s = f.add_netdevs();
  s->set_name("enP7s7");
  s->set_operstate("up");
  s->add_ipv4("10.0.0.1/24");
  f.mutable_model()->set_path("/models/q");
  f.mutable_model()->set_exists(true);
  f.mutable_model()->set_has_config(true);
  f.mutable_model()->set_file_count(2);
  f.mutable_model()->set_total_bytes(1000);
  v1::SecurityFact* sec = f.mutable_security();
  sec->set_token_auth(true);
  sec->set_tls(true);
  sec->set_client_cert_required(true);
  sec->set_listen("0.0.0.0:9300");
  sec->set_tls_subject("/CN=" + name);
  sec->set_tls_not_after_unix(kNow + int64_t{100} * 365 * 86400);  // valid whatever the clock says
  sec->add_model_roots("/models");
  return f;
}

inline v1::WeightsManifest Manifest(const std::vector<std::pair<std::string, std::string>>& files) {
  v1::WeightsManifest m;
  m.set_model_path("/models/q");
  for (const auto& [path, sha] : files) {
    v1::FileDigest* d = m.add_files();
    d->set_path(path);
    d->set_size(100);
    d->set_sha256(sha);
  }
  return m;
}

inline const std::vector<std::pair<std::string, std::string>> kFiles = {
    {"config.json", "11"}, {"model-00001.safetensors", "22"}, {"model-00002.safetensors", "33"}};

inline constexpr char kDefaultNccl[] = "nccl:\n  hca: [rocep1s0f0, rocep1s0f1]\n  socket_ifname: enP7s7\n";

inline ClusterSpec Spec(const std::string& nccl = kDefaultNccl,
                 const std::string& extra = "") {
  std::string yaml = absl::StrCat("cluster: t\nmodel:\n  path: /models/q\n", nccl, extra,
                                  "nodes:\n  - {name: spark1, agent: '10.0.0.1:9300'}\n  - {name: spark2, agent: '10.0.0.2:9300'}\n");
  absl::StatusOr<ClusterSpec> spec = ParseClusterSpec(yaml, "t.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

inline std::vector<NodeObservation> Observe(const v1::NodeFacts& a, const v1::NodeFacts& b) {
  std::vector<NodeObservation> obs(2);
  obs[0].facts = a;
  obs[1].facts = b;
  obs[0].manifest = Manifest(kFiles);
  obs[1].manifest = Manifest(kFiles);
  return obs;
}

// The row of `check` on `node` (a test failure, and a failing stand-in row, when there is none).
inline const CheckResult& Row(const PreflightReport& r, const std::string& check, const std::string& node) {
  for (const auto& c : r.checks) {
    if (c.check == check && c.node == node) return c;
  }
  static CheckResult missing{"<missing>", "", CheckStatus::kFail, "", "", ""};
  ADD_FAILURE() << "no row " << check << " / " << node;
  return missing;
}

}  // namespace tandem::controller::testing
