// Per-interface counters for `tandemctl linktest` and the agent's link-utilisation metrics: the
// kernel's netdev statistics (/sys/class/net/IF/statistics/*), the driver's ethtool statistics
// (tx_bytes_phy, rx_discards_phy, rx_out_of_buffer, ... whatever the driver offers) and the PCIe
// link the NIC sits on. Read under a FactsRoots so tests point them at fake trees: under the real
// /sys the ethtool statistics come from the SIOCETHTOOL ioctl (ETHTOOL_GSSET_INFO, GSTRINGS,
// GSTATS); under any other root from the file <root>/class/net/IF/ethtool_stats, lines
// "name: value" as `ethtool -S` prints them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "agentd/node_facts.h"

namespace tandem::agentd {

struct InterfaceCounters {
  std::string name;
  std::map<std::string, uint64_t> netdev;   // statistics/* (rx_bytes, tx_bytes, rx_dropped, ...)
  std::map<std::string, uint64_t> ethtool;  // driver statistics; empty when the driver offers none
  std::string ethtool_error;                // why `ethtool` is empty: the driver offers none (lo:
                                            // EOPNOTSUPP) or the read failed; "" when read
  int64_t speed_mbps = -1;                  // class/net/IF/speed; -1 unknown
  // class/net/IF/device exists: a NIC on a bus. Virtual interfaces (veth, bridge, lo) have none,
  // and their speed_mbps is one the kernel made up (veth: always 10000), not a negotiated one.
  bool has_device = false;
  std::string pcie_speed;                   // device/current_link_speed, e.g. "16.0 GT/s PCIe"; "" none
  std::string pcie_width;                   // device/current_link_width, e.g. "4"; "" none
  double pcie_gbps_ceiling = 0;             // PcieGbpsCeiling(speed, width); 0 unknown
  int64_t read_unix_ns = 0;                 // when the counters were read (CLOCK_REALTIME)
};

// Reads one interface. NotFound when class/net/IF does not exist; a missing statistics or
// ethtool file is not an error (the maps stay empty, ethtool_error says why).
absl::StatusOr<InterfaceCounters> ReadInterfaceCounters(const FactsRoots& roots, const std::string& ifname);

// The cheap part of ReadInterfaceCounters: netdev statistics and speed only (no ethtool, no
// PCIe), for samplers that run every few seconds (agentd/link_rates.h).
absl::StatusOr<InterfaceCounters> ReadInterfaceNetdevCounters(const FactsRoots& roots, const std::string& ifname);

// after - before for every key present in both (a counter that went backwards, e.g. a driver
// reset, is dropped rather than wrapped). Keys only in one side are left out.
std::map<std::string, uint64_t> CounterDelta(const std::map<std::string, uint64_t>& before,
                                             const std::map<std::string, uint64_t>& after);

}  // namespace tandem::agentd
