#include "tests/common/fake_node.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

namespace tandem::testing {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "WriteFakeNode: " << what << std::endl;
  std::abort();
}

void MakeDirs(const fs::path& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec) Die("mkdir " + p.string() + ": " + ec.message());
}

// A relative symlink, as sysfs uses, so the tree can be moved or copied.
void Symlink(const fs::path& target, const fs::path& link) {
  MakeDirs(link.parent_path());
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_symlink(target, link, ec);
  if (ec) Die("symlink " + link.string() + ": " + ec.message());
}

std::string Hex4(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04x", v & 0xffff);
  return buf;
}

// fe80::<EUI-64 of a made-up MAC>, in the kernel's fully expanded form.
std::string LinkLocalGid(int hca_index) {
  // MAC 4c:bb:47:00:01:0N -> EUI-64 4ebb:47ff:fe00:010N (universal/local bit flipped).
  return "fe80:0000:0000:0000:4ebb:47ff:fe00:" + Hex4(0x0100 + hca_index);
}

std::string GlobalIpv6Gid(int hca_index) {
  return "fd00:0000:0000:00" + Hex4(0x10 + hca_index).substr(2) + ":4ebb:47ff:fe00:" +
         Hex4(0x0100 + hca_index);
}

const char* kZeroGid = "0000:0000:0000:0000:0000:0000:0000:0000";

// The bus/device part of a PCI address with a new function number.
std::string WithFunction(const std::string& bdf, int fn) {
  auto dot = bdf.rfind('.');
  std::string base = dot == std::string::npos ? bdf : bdf.substr(0, dot);
  return base + "." + std::to_string(fn);
}

void WriteNetdevFiles(const fs::path& dir, const std::string& operstate, int mtu, int64_t speed,
                      const std::string& ipv4_line, int index) {
  WriteTextFile((dir / "operstate").string(), operstate + "\n");
  WriteTextFile((dir / "mtu").string(), std::to_string(mtu) + "\n");
  WriteTextFile((dir / "speed").string(), std::to_string(speed) + "\n");
  char mac[32];
  std::snprintf(mac, sizeof(mac), "4c:bb:47:00:01:%02x\n", index & 0xff);
  WriteTextFile((dir / "address").string(), mac);
  WriteTextFile((dir / "tandem_ipv4").string(), ipv4_line.empty() ? "" : ipv4_line + "\n");
}

void WriteHca(const fs::path& sys, const FakeHca& hca, const std::string& bdf, int index) {
  const fs::path pci_rel = fs::path("devices") / "pci0000:00" / bdf;
  const fs::path pci_dir = sys / pci_rel;
  MakeDirs(pci_dir);
  WriteTextFile((pci_dir / "current_link_speed").string(), hca.pcie_link_speed + "\n");
  WriteTextFile((pci_dir / "current_link_width").string(), hca.pcie_link_width + "\n");
  WriteTextFile((pci_dir / "vendor").string(), "0x15b3\n");  // Mellanox
  Symlink(fs::path("../../../") / pci_rel, sys / "bus" / "pci" / "devices" / bdf);

  // The netdev of this PCI function.
  const fs::path net_dir = pci_dir / "net" / hca.netdev;
  MakeDirs(net_dir);
  std::string ipv4_line = hca.ipv4.empty() ? "" : hca.ipv4 + "/" + std::to_string(hca.prefix);
  WriteNetdevFiles(net_dir, hca.netdev_operstate, hca.mtu, hca.speed_mbps, ipv4_line, index);
  Symlink(fs::path("../../") / pci_rel / "net" / hca.netdev, sys / "class" / "net" / hca.netdev);
  Symlink(fs::path("../../../") / bdf, net_dir / "device");

  // The RDMA device with one port and its GID table.
  const fs::path ib_dir = pci_dir / "infiniband" / hca.name;
  const fs::path port = ib_dir / "ports" / "1";
  MakeDirs(port / "gids");
  MakeDirs(port / "gid_attrs" / "types");
  MakeDirs(port / "gid_attrs" / "ndevs");
  WriteTextFile((port / "state").string(), hca.port_state + "\n");
  WriteTextFile((port / "phys_state").string(), hca.phys_state + "\n");
  WriteTextFile((port / "link_layer").string(), hca.link_layer + "\n");
  Symlink(fs::path("../../../") / bdf, ib_dir / "device");
  Symlink(fs::path("../../") / pci_rel / "infiniband" / hca.name,
          sys / "class" / "infiniband" / hca.name);

  struct Entry {
    std::string gid, type;
  };
  std::vector<Entry> entries = {{LinkLocalGid(index), "IB/RoCE v1"},
                                {LinkLocalGid(index), "RoCE v2"}};
  GidLayout layout = hca.ipv4.empty() ? GidLayout::kNoIpv4 : hca.gids;
  if (layout == GidLayout::kDgxSparkWithIpv6) {
    entries.push_back({GlobalIpv6Gid(index), "IB/RoCE v1"});
    entries.push_back({GlobalIpv6Gid(index), "RoCE v2"});
  }
  if (layout != GidLayout::kNoIpv4) {
    entries.push_back({Ipv4MappedGid(hca.ipv4), "IB/RoCE v1"});
    entries.push_back({Ipv4MappedGid(hca.ipv4), "RoCE v2"});
  }
  // The kernel shows a fixed-size table; unused slots read as all zeros and their attribute
  // files fail to read (EINVAL). We write the zeros and leave the attributes out.
  const size_t table_size = 16;
  for (size_t i = 0; i < table_size; ++i) {
    const std::string idx = std::to_string(i);
    if (i < entries.size()) {
      WriteTextFile((port / "gids" / idx).string(), entries[i].gid + "\n");
      WriteTextFile((port / "gid_attrs" / "types" / idx).string(), entries[i].type + "\n");
      WriteTextFile((port / "gid_attrs" / "ndevs" / idx).string(), hca.netdev + "\n");
    } else {
      WriteTextFile((port / "gids" / idx).string(), std::string(kZeroGid) + "\n");
    }
  }
}

}  // namespace

void WriteTextFile(const std::string& path, const std::string& text) {
  MakeDirs(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) Die("write " + path);
}

std::string Ipv4MappedGid(const std::string& ipv4) {
  in_addr a{};
  if (inet_pton(AF_INET, ipv4.c_str(), &a) != 1) Die("bad IPv4 " + ipv4);
  uint32_t v = ntohl(a.s_addr);
  return "0000:0000:0000:0000:0000:ffff:" + Hex4(v >> 16) + ":" + Hex4(v & 0xffff);
}

std::pair<std::string, std::string> WriteFakeNode(const std::string& root, const FakeNodeOptions& opts) {
  const fs::path sys = fs::path(root) / "sys";
  const fs::path proc = fs::path(root) / "proc";
  MakeDirs(sys / "class" / "net");
  MakeDirs(sys / "class" / "infiniband");
  MakeDirs(proc / "sys" / "kernel");

  // Driver: a real node has both files; the procfs one carries the long NVRM banner.
  if (!opts.driver_version.empty()) {
    if (opts.driver_in_sysfs) {
      WriteTextFile((sys / "module" / "nvidia" / "version").string(), opts.driver_version + "\n");
    }
    WriteTextFile((proc / "driver" / "nvidia" / "version").string(),
                  "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  " + opts.driver_version +
                      "  Release Build  (dvs-builder@U22-I3-AE18-23-3)  Wed Sep 24 21:17:22 UTC 2025\n"
                      "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) \n");
    for (size_t i = 0; i < opts.gpu_models.size(); ++i) {
      char bus[32];
      std::snprintf(bus, sizeof(bus), "000f:%02zx:00.0", i + 1);
      char uuid[64];
      std::snprintf(uuid, sizeof(uuid), "GPU-5f1c2a3b-0000-4000-8000-%012zx", i + 1);
      WriteTextFile((proc / "driver" / "nvidia" / "gpus" / bus / "information").string(),
                    "Model: \t\t " + opts.gpu_models[i] +
                        "\nIRQ:   \t\t 0\nGPU UUID: \t " + uuid +
                        "\nVideo BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nDMA Size: \t 42 bits\n"
                        "DMA Mask: \t 0x3ffffffffff\nBus Location: \t " + bus +
                        "\nDevice Minor: \t " + std::to_string(i) + "\nGPU Excluded:\t No\n");
    }
  }

  WriteTextFile((proc / "sys" / "kernel" / "osrelease").string(), opts.kernel_release + "\n");

  char meminfo[1024];
  std::snprintf(meminfo, sizeof(meminfo),
                "MemTotal:       %llu kB\nMemFree:        %llu kB\nMemAvailable:   %llu kB\n"
                "Buffers:          123456 kB\nCached:         4567890 kB\nSwapCached:            0 kB\n"
                "SwapTotal:      %llu kB\nSwapFree:       %llu kB\nHugePages_Total:       0\n"
                "Hugepagesize:       2048 kB\n",
                static_cast<unsigned long long>(opts.mem_total_kb),
                static_cast<unsigned long long>(opts.mem_available_kb / 2),
                static_cast<unsigned long long>(opts.mem_available_kb),
                static_cast<unsigned long long>(opts.swap_total_kb),
                static_cast<unsigned long long>(opts.swap_total_kb));
  WriteTextFile((proc / "meminfo").string(), meminfo);

  std::set<std::string> used_bdfs;
  for (size_t i = 0; i < opts.hcas.size(); ++i) {
    std::string bdf = opts.hcas[i].pci.empty() ? "0000:01:00.0" : opts.hcas[i].pci;
    for (int fn = 1; used_bdfs.count(bdf) && fn < 8; ++fn) bdf = WithFunction(bdf, fn);
    used_bdfs.insert(bdf);
    WriteHca(sys, opts.hcas[i], bdf, static_cast<int>(i));
  }

  if (!opts.socket_ifname.empty()) {
    const std::string bdf = "0007:07:00.0";  // the Realtek 10GbE of a DGX Spark
    const fs::path pci_rel = fs::path("devices") / "pci0007:00" / bdf;
    const fs::path dir = sys / pci_rel / "net" / opts.socket_ifname;
    MakeDirs(dir);
    WriteNetdevFiles(dir, opts.socket_operstate, 1500, opts.socket_operstate == "up" ? 10000 : -1,
                     opts.socket_ipv4.empty() ? "" : opts.socket_ipv4 + "/24", 0x40);
    Symlink(fs::path("../../") / pci_rel / "net" / opts.socket_ifname,
            sys / "class" / "net" / opts.socket_ifname);
  }
  if (opts.with_loopback) {
    const fs::path dir = sys / "devices" / "virtual" / "net" / "lo";
    MakeDirs(dir);
    WriteNetdevFiles(dir, "unknown", 65536, -1, "127.0.0.1/8", 0);
    Symlink(fs::path("../../devices/virtual/net/lo"), sys / "class" / "net" / "lo");
  }
  return {sys.string(), proc.string()};
}

}  // namespace tandem::testing
