#include "agentd/node_facts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "agentd/sha256.h"
#include "common/status.h"
#include "common/version.h"

namespace tandem::agentd {
namespace fs = std::filesystem;

namespace {

std::string_view Trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// read(2) rather than iostreams: a sysfs attribute that cannot be read (EINVAL on an unused
// GID slot, on the speed of a down link) must be an error, and iostreams hide read errors.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError("cannot open " + path + ": " + std::strerror(errno));
  std::string out;
  char buf[8192];
  while (true) {
    ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      return absl::DataLossError("cannot read " + path + ": " + std::strerror(e));
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
    if (out.size() > (16u << 20)) {  // no fact file is this big; a wrong path is
      ::close(fd);
      return absl::OutOfRangeError(path + " is larger than 16 MiB");
    }
  }
  ::close(fd);
  return out;
}

// Names in a directory, sorted; numeric names sort by value (gids/2 before gids/10).
std::vector<std::string> ListDir(const fs::path& dir, std::string* error) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    if (error) *error = "cannot list " + dir.string() + ": " + ec.message();
    return names;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    unsigned long long x, y;
    bool na = absl::SimpleAtoi(AsAbsl(a), &x), nb = absl::SimpleAtoi(AsAbsl(b), &y);
    if (na && nb) return x < y;
    if (na != nb) return na;
    return a < b;
  });
  return names;
}

void AppendError(std::string* dst, const std::string& what) {
  if (!dst->empty()) *dst += "; ";
  *dst += what;
}

// Addresses of real interfaces, by name, as "a.b.c.d/len".
std::map<std::string, std::vector<std::string>> SystemIpv4Addresses() {
  std::map<std::string, std::vector<std::string>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
    int prefix = 0;
    if (a->ifa_netmask) {
      uint32_t mask = ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr);
      prefix = __builtin_popcount(mask);
    }
    out[a->ifa_name].push_back(std::string(buf) + "/" + std::to_string(prefix));
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReadTrimmedFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return std::string(Trim(text));
}

absl::StatusOr<std::string> ParseNvrmVersion(std::string_view text) {
  // "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build ..."
  // The version is the first token after "Kernel Module" (and the optional "for <arch>")
  // that starts with a digit and contains a dot.
  size_t line_end = text.find('\n');
  std::string_view line = text.substr(0, line_end);
  if (line.find("NVRM version:") == std::string_view::npos) {
    return absl::InvalidArgumentError("no 'NVRM version:' line");
  }
  size_t km = line.find("Kernel Module");
  std::string_view rest = km == std::string_view::npos ? line : line.substr(km);
  std::istringstream words{std::string(rest)};
  std::string w;
  while (words >> w) {
    if (!w.empty() && std::isdigit(static_cast<unsigned char>(w[0])) &&
        w.find('.') != std::string::npos) {
      return w;
    }
  }
  return absl::InvalidArgumentError("no version number in: " + std::string(line));
}

v1::DriverFact ReadDriverFact(const FactsRoots& roots) {
  v1::DriverFact f;
  const std::string sys_path = roots.sysfs_root + "/module/nvidia/version";
  const std::string proc_path = roots.procfs_root + "/driver/nvidia/version";
  if (auto v = ReadTrimmedFile(sys_path); v.ok() && !v->empty()) {
    f.set_version(*v);
    f.set_source(sys_path);
    return f;
  }
  auto text = ReadWholeFile(proc_path);
  if (!text.ok()) {
    f.set_error("no NVIDIA driver: neither " + sys_path + " nor " + proc_path + " is readable");
    return f;
  }
  auto v = ParseNvrmVersion(*text);
  if (!v.ok()) {
    f.set_error(proc_path + ": " + StatusText(v.status()));
    return f;
  }
  f.set_version(*v);
  f.set_source(proc_path);
  return f;
}

v1::KernelFact ReadKernelFact(const FactsRoots& roots) {
  v1::KernelFact f;
  auto v = ReadTrimmedFile(roots.procfs_root + "/sys/kernel/osrelease");
  if (!v.ok()) {
    f.set_error(StatusText(v.status()));
  } else if (v->empty()) {
    f.set_error(roots.procfs_root + "/sys/kernel/osrelease is empty");
  } else {
    f.set_release(*v);
  }
  return f;
}

v1::MemoryFact ParseMeminfo(std::string_view text) {
  v1::MemoryFact f;
  std::map<std::string, uint64_t> kb;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    std::istringstream rest(line.substr(colon + 1));
    uint64_t value = 0;
    if (rest >> value) kb[key] = value;
  }
  std::string missing;
  auto take = [&](const char* key, void (v1::MemoryFact::*set)(uint64_t)) {
    auto it = kb.find(key);
    if (it == kb.end()) {
      AppendError(&missing, key);
    } else {
      (f.*set)(it->second * 1024);  // meminfo counts in KiB despite the "kB" label
    }
  };
  take("MemTotal", &v1::MemoryFact::set_total_bytes);
  take("MemAvailable", &v1::MemoryFact::set_available_bytes);
  take("SwapTotal", &v1::MemoryFact::set_swap_total_bytes);
  if (!missing.empty()) f.set_error("meminfo lacks: " + missing);
  return f;
}

v1::MemoryFact ReadMemoryFact(const FactsRoots& roots) {
  auto text = ReadWholeFile(roots.procfs_root + "/meminfo");
  if (!text.ok()) {
    v1::MemoryFact f;
    f.set_error(StatusText(text.status()));
    return f;
  }
  return ParseMeminfo(*text);
}

std::vector<v1::GpuFact> ReadGpuFacts(const FactsRoots& roots, std::string* error) {
  std::vector<v1::GpuFact> gpus;
  const fs::path dir = fs::path(roots.procfs_root) / "driver" / "nvidia" / "gpus";
  std::string list_error;
  for (const std::string& bus : ListDir(dir, &list_error)) {
    v1::GpuFact g;
    g.set_bus_location(bus);
    auto text = ReadWholeFile((dir / bus / "information").string());
    if (!text.ok()) {
      g.set_error(StatusText(text.status()));
    } else {
      std::istringstream in(*text);
      std::string line;
      while (std::getline(in, line)) {
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string_view key = Trim(std::string_view(line).substr(0, colon));
        std::string value(Trim(std::string_view(line).substr(colon + 1)));
        if (key == "Model") g.set_model(value);
        if (key == "GPU UUID") g.set_uuid(value);
      }
      if (g.model().empty()) g.set_error("no 'Model:' line in " + (dir / bus / "information").string());
    }
    gpus.push_back(std::move(g));
  }
  if (!list_error.empty() && error) *error = "no NVIDIA GPUs listed: " + list_error;
  return gpus;
}

bool IsZeroGid(std::string_view gid) {
  for (char c : gid) {
    if (c != '0' && c != ':') return false;
  }
  return !gid.empty();
}

std::string GidToIpv4(std::string_view gid) {
  // Eight groups of four hex digits; IPv4-mapped is 0:0:0:0:0:ffff:AABB:CCDD.
  std::vector<uint32_t> groups;
  size_t pos = 0;
  while (pos <= gid.size()) {
    size_t colon = gid.find(':', pos);
    std::string_view g = gid.substr(pos, colon == std::string_view::npos ? std::string_view::npos : colon - pos);
    if (g.empty() || g.size() > 4) return "";
    uint32_t v = 0;
    for (char c : g) {
      int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
              : (c >= 'a' && c <= 'f')                   ? c - 'a' + 10
              : (c >= 'A' && c <= 'F')                   ? c - 'A' + 10
                                                          : -1;
      if (d < 0) return "";
      v = v * 16 + static_cast<uint32_t>(d);
    }
    groups.push_back(v);
    if (colon == std::string_view::npos) break;
    pos = colon + 1;
  }
  if (groups.size() != 8) return "";
  for (int i = 0; i < 5; ++i) {
    if (groups[i] != 0) return "";
  }
  if (groups[5] != 0xffff) return "";
  return std::to_string(groups[6] >> 8) + "." + std::to_string(groups[6] & 0xff) + "." +
         std::to_string(groups[7] >> 8) + "." + std::to_string(groups[7] & 0xff);
}

double PcieGbpsCeiling(std::string_view link_speed, std::string_view link_width) {
  // "32.0 GT/s PCIe" (newer kernels) or "8 GT/s"; width "4" (some tools print "x4").
  std::string speed_text(Trim(link_speed));
  std::string width_text(Trim(link_width));
  if (!width_text.empty() && (width_text[0] == 'x' || width_text[0] == 'X')) width_text.erase(0, 1);
  char* end = nullptr;
  double gts = std::strtod(speed_text.c_str(), &end);
  if (end == speed_text.c_str() || gts <= 0) return 0;
  unsigned long long lanes = 0;
  if (!absl::SimpleAtoi(AsAbsl(width_text), &lanes) || lanes == 0) return 0;
  const double encoding = gts >= 8.0 ? 128.0 / 130.0 : 8.0 / 10.0;
  return gts * static_cast<double>(lanes) * encoding;
}

std::vector<v1::RdmaDevice> ReadRdmaDevices(const FactsRoots& roots, std::string* error) {
  std::vector<v1::RdmaDevice> devices;
  const fs::path ib = fs::path(roots.sysfs_root) / "class" / "infiniband";
  std::error_code ec;
  if (!fs::exists(ib, ec)) {
    if (error) *error = ib.string() + " does not exist (no RDMA driver loaded?)";
    return devices;
  }
  std::string list_error;
  for (const std::string& name : ListDir(ib, &list_error)) {
    v1::RdmaDevice dev;
    dev.set_name(name);
    const fs::path dev_dir = ib / name;
    std::string dev_error;

    // PCI address: the basename of the `device` symlink's target (../../../0000:01:00.0).
    fs::path target = fs::read_symlink(dev_dir / "device", ec);
    if (ec) {
      AppendError(&dev_error, "no device link: " + ec.message());
    } else {
      dev.set_pci_address(target.filename().string());
      auto speed = ReadTrimmedFile((dev_dir / "device" / "current_link_speed").string());
      auto width = ReadTrimmedFile((dev_dir / "device" / "current_link_width").string());
      if (speed.ok()) dev.set_pcie_link_speed(*speed);
      if (width.ok()) dev.set_pcie_link_width(*width);
      if (speed.ok() && width.ok()) {
        dev.set_pcie_gbps_ceiling(PcieGbpsCeiling(*speed, *width));
      } else {
        AppendError(&dev_error, "PCIe link unknown: " +
                                    StatusText(speed.ok() ? width.status() : speed.status()));
      }
      for (const std::string& nd : ListDir(dev_dir / "device" / "net", nullptr)) dev.add_netdevs(nd);
    }

    std::string ports_error;
    for (const std::string& p : ListDir(dev_dir / "ports", &ports_error)) {
      unsigned long long port_num = 0;
      if (!absl::SimpleAtoi(AsAbsl(p), &port_num)) continue;
      v1::RdmaPort* port = dev.add_ports();
      port->set_port(static_cast<uint32_t>(port_num));
      const fs::path pdir = dev_dir / "ports" / p;
      std::string port_error;
      auto read_into = [&](const char* file, void (v1::RdmaPort::*set)(const std::string&)) {
        auto v = ReadTrimmedFile((pdir / file).string());
        if (v.ok()) {
          (port->*set)(*v);
        } else {
          AppendError(&port_error, StatusText(v.status()));
        }
      };
      read_into("state", &v1::RdmaPort::set_state);
      read_into("phys_state", &v1::RdmaPort::set_phys_state);
      read_into("link_layer", &v1::RdmaPort::set_link_layer);

      std::string gids_error;
      for (const std::string& idx : ListDir(pdir / "gids", &gids_error)) {
        unsigned long long index = 0;
        if (!absl::SimpleAtoi(AsAbsl(idx), &index)) continue;
        auto gid = ReadTrimmedFile((pdir / "gids" / idx).string());
        // An unused slot reads as all zeros; skip it (its attribute files do not read at all).
        if (gid.ok() && IsZeroGid(*gid)) continue;
        v1::GidEntry* e = port->add_gids();
        e->set_index(static_cast<uint32_t>(index));
        std::string entry_error;
        if (!gid.ok()) {
          AppendError(&entry_error, StatusText(gid.status()));
        } else {
          e->set_gid(*gid);
          e->set_ipv4(GidToIpv4(*gid));
        }
        auto type = ReadTrimmedFile((pdir / "gid_attrs" / "types" / idx).string());
        if (type.ok()) {
          e->set_type(*type);
        } else {
          AppendError(&entry_error, "type: " + StatusText(type.status()));
        }
        auto ndev = ReadTrimmedFile((pdir / "gid_attrs" / "ndevs" / idx).string());
        if (ndev.ok()) {
          e->set_netdev(*ndev);
        } else {
          AppendError(&entry_error, "ndev: " + StatusText(ndev.status()));
        }
        e->set_error(entry_error);
      }
      if (!gids_error.empty()) AppendError(&port_error, gids_error);
      port->set_error(port_error);
    }
    if (!ports_error.empty()) AppendError(&dev_error, ports_error);
    dev.set_error(dev_error);
    devices.push_back(std::move(dev));
  }
  if (!list_error.empty() && error) *error = list_error;
  return devices;
}

std::vector<v1::NetDev> ReadNetDevs(const FactsRoots& roots, std::string* error) {
  std::vector<v1::NetDev> out;
  const fs::path net = fs::path(roots.sysfs_root) / "class" / "net";
  std::string list_error;
  std::vector<std::string> names = ListDir(net, &list_error);
  if (!list_error.empty() && error) *error = list_error;
  std::map<std::string, std::vector<std::string>> system_addrs;
  bool system_addrs_read = false;
  for (const std::string& name : names) {
    v1::NetDev nd;
    nd.set_name(name);
    const fs::path dir = net / name;
    std::string nd_error;
    if (auto v = ReadTrimmedFile((dir / "operstate").string()); v.ok()) {
      nd.set_operstate(*v);
    } else {
      AppendError(&nd_error, StatusText(v.status()));
    }
    unsigned long long mtu = 0;
    if (auto v = ReadTrimmedFile((dir / "mtu").string()); v.ok() && absl::SimpleAtoi(AsAbsl(*v), &mtu)) {
      nd.set_mtu(static_cast<uint32_t>(mtu));
    } else {
      AppendError(&nd_error, "mtu unreadable");
    }
    // The kernel fails the read (EINVAL) or shows -1 when the link is down or has no speed;
    // both mean "unknown", which is not an error.
    long long speed = -1;
    if (auto v = ReadTrimmedFile((dir / "speed").string()); !v.ok() || !absl::SimpleAtoi(AsAbsl(*v), &speed)) {
      speed = -1;
    }
    nd.set_speed_mbps(speed);

    // Addresses are not in sysfs. A fake tree (tests) supplies them in a `tandem_ipv4` file
    // next to the netdev's attributes, one "a.b.c.d/len" per line; when that file exists it is
    // used instead of the system's own addresses (getifaddrs), so a fake node never reports
    // the test machine's addresses. Real sysfs never has this file.
    const fs::path fake_addrs = dir / "tandem_ipv4";
    std::error_code ec;
    if (fs::exists(fake_addrs, ec)) {
      auto text = ReadWholeFile(fake_addrs.string());
      if (text.ok()) {
        std::istringstream in(*text);
        std::string line;
        while (std::getline(in, line)) {
          std::string_view t = Trim(line);
          if (!t.empty()) nd.add_ipv4(std::string(t));
        }
      } else {
        AppendError(&nd_error, StatusText(text.status()));
      }
    } else {
      if (!system_addrs_read) {
        system_addrs = SystemIpv4Addresses();
        system_addrs_read = true;
      }
      for (const std::string& a : system_addrs[name]) nd.add_ipv4(a);
    }
    nd.set_error(nd_error);
    out.push_back(std::move(nd));
  }
  return out;
}

v1::ModelFolderFact ReadModelFolderFact(const std::string& model_path) {
  v1::ModelFolderFact f;
  f.set_path(model_path);
  std::error_code ec;
  if (!fs::is_directory(model_path, ec)) {
    f.set_exists(false);
    f.set_error(model_path + " is not a directory");
    return f;
  }
  f.set_exists(true);
  f.set_has_config(fs::is_regular_file(fs::path(model_path) / "config.json", ec));
  uint64_t total = 0;
  uint32_t count = 0;
  auto opts = fs::directory_options::follow_directory_symlink | fs::directory_options::skip_permission_denied;
  fs::recursive_directory_iterator it(model_path, opts, ec), end;
  int depth_guard = 0;
  for (; !ec && it != end; it.increment(ec)) {
    // A symlink loop would recurse forever; real model folders are shallow.
    if (it.depth() > 32) {
      it.disable_recursion_pending();
      ++depth_guard;
      continue;
    }
    std::error_code e2;
    if (it->is_regular_file(e2)) {
      uint64_t size = it->file_size(e2);
      if (!e2) {
        total += size;
        ++count;
      }
    }
  }
  if (ec) f.set_error("walking " + model_path + ": " + ec.message());
  if (depth_guard) f.set_error("directory nesting deeper than 32 (symlink loop?) under " + model_path);
  f.set_total_bytes(total);
  f.set_file_count(count);
  return f;
}

v1::AgentBuild ReadAgentBuild() {
  static std::once_flag once;
  static v1::AgentBuild* cached = nullptr;
  std::call_once(once, [] {
    auto* b = new v1::AgentBuild();
    b->set_version(Version());
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    b->set_binary_path(ec ? "" : exe.string());
    auto sha = Sha256File("/proc/self/exe");
    if (sha.ok()) {
      b->set_binary_sha256(*sha);
    } else {
      b->set_error(StatusText(sha.status()));
    }
    cached = b;
  });
  v1::AgentBuild b = *cached;
  // The image digest comes from the environment and is read each time (cheap).
  if (const char* d = std::getenv("TANDEM_IMAGE_DIGEST")) b.set_image_digest(d);
  return b;
}

v1::NodeFacts CollectNodeFacts(const FactsRoots& roots, const std::string& node_name,
                               const std::string& model_path) {
  v1::NodeFacts f;
  f.set_node_name(node_name);
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) f.set_hostname(host);
  *f.mutable_build() = ReadAgentBuild();
  *f.mutable_driver() = ReadDriverFact(roots);
  *f.mutable_kernel() = ReadKernelFact(roots);
  *f.mutable_memory() = ReadMemoryFact(roots);
  std::string err;
  for (auto& g : ReadGpuFacts(roots, &err)) *f.add_gpus() = std::move(g);
  f.set_gpus_error(err);
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) {
    f.set_cuda_visible_devices_set(true);
    f.set_cuda_visible_devices(cvd);
  }
  err.clear();
  for (auto& d : ReadRdmaDevices(roots, &err)) *f.add_rdma() = std::move(d);
  f.set_rdma_error(err);
  err.clear();
  for (auto& n : ReadNetDevs(roots, &err)) *f.add_netdevs() = std::move(n);
  f.set_netdevs_error(err);
  if (!model_path.empty()) *f.mutable_model() = ReadModelFolderFact(model_path);
  f.set_collected_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
  return f;
}

}  // namespace tandem::agentd
