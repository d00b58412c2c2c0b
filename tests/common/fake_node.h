// A builder of fake sysfs/procfs trees shaped like a real node (a DGX Spark by default), so the
// agent's fact readers and the controller's preflight can be tested without the hardware.
//
// The tree mirrors the kernel's layout, symlinks included:
//   <root>/sys/devices/pci0000:00/<bdf>/{current_link_speed,current_link_width}
//   <root>/sys/devices/pci0000:00/<bdf>/infiniband/<hca>/ports/1/{state,phys_state,link_layer,
//       gids/<i>,gid_attrs/types/<i>,gid_attrs/ndevs/<i>}
//   <root>/sys/devices/pci0000:00/<bdf>/net/<netdev>/{operstate,mtu,speed,address,tandem_ipv4}
//   <root>/sys/class/infiniband/<hca> -> ../../devices/.../infiniband/<hca>   (+ device -> <bdf>)
//   <root>/sys/class/net/<netdev>     -> ../../devices/.../net/<netdev>
//   <root>/sys/bus/pci/devices/<bdf>  -> ../../../devices/pci0000:00/<bdf>
//   <root>/sys/module/nvidia/version, <root>/proc/driver/nvidia/{version,gpus/<bdf>/information}
//   <root>/proc/sys/kernel/osrelease, <root>/proc/meminfo
// Interface addresses cannot live in sysfs, so each fake netdev carries a `tandem_ipv4` file
// ("a.b.c.d/len" per line, empty when none); tandem-agentd reads it in place of getifaddrs().
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tandem::testing {

enum class GidLayout {
  kDgxSpark,          // 0: fe80 v1, 1: fe80 v2, 2: ::ffff:ipv4 v1, 3: ::ffff:ipv4 v2
  kDgxSparkWithIpv6,  // extra global IPv6 v1/v2 entries at 2/3 shift the IPv4 ones to 4/5
  kNoIpv4,            // only link-local entries
};

struct FakeHca {
  std::string name = "rocep1s0f0";
  std::string netdev = "enp1s0f0np0";
  std::string ipv4 = "192.168.100.1";  // "" behaves like kNoIpv4 and leaves the netdev without IPv4
  int prefix = 24;
  GidLayout gids = GidLayout::kDgxSpark;
  std::string port_state = "4: ACTIVE";
  std::string netdev_operstate = "up";
  // PCI function of the HCA. When two HCAs name the same address (the defaults do), the later
  // one gets the next function number (0000:01:00.1), as the two halves of a split CX-7 port do.
  std::string pci = "0000:01:00.0";
  // Added fields (after the ones above so that positional initialisation keeps working).
  std::string phys_state = "5: LinkUp";
  std::string link_layer = "Ethernet";
  std::string pcie_link_speed = "32.0 GT/s PCIe";
  std::string pcie_link_width = "4";
  int mtu = 9000;
  int64_t speed_mbps = 200000;  // written to <netdev>/speed; -1 is what the kernel shows when down
};

struct FakeNodeOptions {
  std::string driver_version = "580.95.05";  // "" = no NVIDIA driver at all
  bool driver_in_sysfs = true;               // false: only <procfs>/driver/nvidia/version
  std::string kernel_release = "6.11.0-1016-nvidia";
  uint64_t mem_total_kb = 128ull * 1024 * 1024;
  uint64_t mem_available_kb = 120ull * 1024 * 1024;
  uint64_t swap_total_kb = 0;
  std::vector<std::string> gpu_models = {"NVIDIA GB10"};
  std::vector<FakeHca> hcas = {FakeHca{}, FakeHca{"rocep1s0f1", "enp1s0f1np1", "192.168.101.1", 24}};
  std::string socket_ifname = "enP7s7";  // "" = none
  std::string socket_ipv4 = "10.0.0.1";  // written as /24; "" = no address
  std::string socket_operstate = "up";
  // Added: a loopback entry like the real /sys/class/net/lo (agents must skip it).
  bool with_loopback = true;
};

// Creates <root>/sys and <root>/proc; returns {sysfs_root, procfs_root}. Aborts the test
// program (with a message) when the tree cannot be written: that is a broken test set-up.
std::pair<std::string, std::string> WriteFakeNode(const std::string& root, const FakeNodeOptions& opts);

// Helpers for tests that break a tree after writing it.
void WriteTextFile(const std::string& path, const std::string& text);  // creates parent dirs
// "192.168.100.1" -> "0000:0000:0000:0000:0000:ffff:c0a8:6401" (the kernel's GID format).
std::string Ipv4MappedGid(const std::string& ipv4);

}  // namespace tandem::testing
