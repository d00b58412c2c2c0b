#include "agentd/link_counters.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "agentd/link_socket.h"
#include "common/status.h"

namespace tandem::agentd {
namespace fs = std::filesystem;

namespace {

std::string_view Trim(std::string_view s) { return AsStd(absl::StripAsciiWhitespace(AsAbsl(s))); }

// The ethtool ioctl only reaches the interfaces of this process's network namespace, which is
// what the real /sys shows; any other root is a fake tree whose statistics live in a file.
bool IsRealSysfs(const std::string& root) {
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return r == "/sys";
}

// A datagram socket to carry SIOCETHTOOL. ethtool(8) tries AF_INET first and AF_UNIX when IPv4
// is not compiled in; so do we.
Fd IoctlSocket() {
  Fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) fd = Fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  return fd;
}

// One SIOCETHTOOL call; errno is left for the caller on failure.
bool Ethtool(int fd, const std::string& ifname, void* cmd) {
  struct ifreq ifr;
  std::memset(&ifr, 0, sizeof(ifr));
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  ifr.ifr_data = static_cast<char*>(cmd);
  return ::ioctl(fd, SIOCETHTOOL, &ifr) == 0;
}

std::string ErrnoText(const char* what, int err) {
  if (err == EOPNOTSUPP) return std::string("the driver offers no ethtool statistics (") + what + ": EOPNOTSUPP)";
  return std::string(what) + ": " + std::strerror(err);
}

// The driver's ETH_SS_STATS set: its size (GSSET_INFO), the names (GSTRINGS), then the values
// (GSTATS). A driver that offers none is not an error; `*why` says so and the map stays empty.
std::map<std::string, uint64_t> ReadEthtoolIoctl(const std::string& ifname, std::string* why) {
  std::map<std::string, uint64_t> out;
  const Fd sock = IoctlSocket();
  if (sock.get() < 0) {
    *why = ErrnoText("socket for SIOCETHTOOL", errno);
    return out;
  }
  // ethtool_sset_info ends in a flexible array with one u32 per bit set in sset_mask.
  std::vector<uint8_t> sset_buf(sizeof(struct ethtool_sset_info) + sizeof(uint32_t));
  auto* sset = reinterpret_cast<struct ethtool_sset_info*>(sset_buf.data());
  sset->cmd = ETHTOOL_GSSET_INFO;
  sset->sset_mask = 1ULL << ETH_SS_STATS;
  if (!Ethtool(sock.get(), ifname, sset)) {
    *why = ErrnoText("ETHTOOL_GSSET_INFO", errno);
    return out;
  }
  // The kernel clears the bits of the sets the driver does not offer.
  if (!(sset->sset_mask & (1ULL << ETH_SS_STATS)) || sset->data[0] == 0) {
    *why = "the driver offers no ethtool statistics";
    return out;
  }
  const uint32_t n = sset->data[0];
  if (n > (1u << 20)) {  // no driver has a million counters; a garbled answer might
    *why = "ETHTOOL_GSSET_INFO: implausible count " + std::to_string(n);
    return out;
  }

  // The kernel fills GSTRINGS and GSTATS with the count it sees at that moment, not the one we
  // pass, so a set that grew since GSSET_INFO (channels added with `ethtool -L`) would write past
  // a buffer sized to n. Room for twice as many, plus some, keeps such a race inside our memory;
  // the returned counts then show it and the read is refused below.
  const size_t room = 2 * size_t{n} + 64;
  std::vector<uint8_t> strings_buf(sizeof(struct ethtool_gstrings) + room * ETH_GSTRING_LEN);
  auto* strings = reinterpret_cast<struct ethtool_gstrings*>(strings_buf.data());
  strings->cmd = ETHTOOL_GSTRINGS;
  strings->string_set = ETH_SS_STATS;
  strings->len = n;
  if (!Ethtool(sock.get(), ifname, strings)) {
    *why = ErrnoText("ETHTOOL_GSTRINGS", errno);
    return out;
  }

  std::vector<uint8_t> stats_buf(sizeof(struct ethtool_stats) + room * sizeof(uint64_t));
  auto* stats = reinterpret_cast<struct ethtool_stats*>(stats_buf.data());
  stats->cmd = ETHTOOL_GSTATS;
  stats->n_stats = n;
  if (!Ethtool(sock.get(), ifname, stats)) {
    *why = ErrnoText("ETHTOOL_GSTATS", errno);
    return out;
  }
  // The kernel writes back how many it filled; a set that changed size between the calls would
  // misalign names and values, so such a read is refused, not guessed.
  if (strings->len != n || stats->n_stats != n) {
    *why = "ethtool statistics changed size while being read (" + std::to_string(n) + " names, " +
           std::to_string(strings->len) + "/" + std::to_string(stats->n_stats) + " returned)";
    return out;
  }
  const auto* names = reinterpret_cast<const char*>(strings->data);
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = names + size_t{i} * ETH_GSTRING_LEN;
    // Names fill the whole slot when they are exactly ETH_GSTRING_LEN long (no NUL).
    std::string key(name, ::strnlen(name, ETH_GSTRING_LEN));
    std::string_view trimmed = Trim(key);
    if (trimmed.empty()) continue;
    // Some drivers repeat a name (per-queue sets without an index); the first one is kept so
    // the same name always means the same slot between two reads.
    out.emplace(std::string(trimmed), stats->data[i]);
  }
  return out;
}

// <root>/class/net/IF/ethtool_stats as `ethtool -S IF` prints it: an optional "NIC statistics:"
// header, then "name: value" per line.
absl::StatusOr<std::map<std::string, uint64_t>> ParseEthtoolStatsFile(const std::string& path,
                                                                      const std::string& text) {
  std::map<std::string, uint64_t> out;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line = Trim(std::string_view(text).substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line == "NIC statistics:") continue;
    size_t colon = line.rfind(':');
    uint64_t value = 0;
    std::string_view name = colon == std::string_view::npos ? std::string_view() : Trim(line.substr(0, colon));
    if (name.empty() || !absl::SimpleAtoi(AsAbsl(Trim(line.substr(colon + 1))), &value)) {
      return absl::InvalidArgumentError(path + ":" + std::to_string(line_no) + ": not \"name: value\": " +
                                        std::string(line));
    }
    out[std::string(name)] = value;
  }
  return out;
}

// Every numeric file of class/net/IF/statistics. Absent directory: empty map.
absl::StatusOr<std::map<std::string, uint64_t>> ReadNetdevStatistics(const fs::path& dir) {
  std::map<std::string, uint64_t> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path p = it->path();
    absl::StatusOr<std::string> text = ReadTrimmedFile(p.string());
    // A counter the driver cannot report right now fails its read; it is left out, not fatal.
    if (!text.ok()) continue;
    uint64_t value = 0;
    if (!absl::SimpleAtoi(AsAbsl(*text), &value)) {
      return absl::InvalidArgumentError(p.string() + ": not a counter: " + *text);
    }
    out[p.filename().string()] = value;
  }
  return out;
}

std::string ReadAttribute(const fs::path& path) {
  absl::StatusOr<std::string> text = ReadTrimmedFile(path.string());
  return text.ok() ? *text : std::string();
}

}  // namespace

absl::StatusOr<InterfaceCounters> ReadInterfaceNetdevCounters(const FactsRoots& roots, const std::string& ifname) {
  if (ifname.empty() || ifname.find('/') != std::string::npos || ifname == "." || ifname == "..") {
    return absl::InvalidArgumentError("not an interface name: \"" + ifname + "\"");
  }
  const fs::path dir = fs::path(roots.sysfs_root) / "class" / "net" / ifname;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return absl::NotFoundError("no interface " + ifname + " (" + dir.string() + ")");
  InterfaceCounters c;
  c.name = ifname;
  c.read_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  ASSIGN_OR_RETURN(c.netdev, ReadNetdevStatistics(dir / "statistics"));
  // Down links and virtual devices read as -1 or fail the read (EINVAL): unknown, not an error.
  long long speed = -1;
  if (!absl::SimpleAtoi(AsAbsl(ReadAttribute(dir / "speed")), &speed) || speed <= 0) speed = -1;
  c.speed_mbps = speed;
  c.has_device = fs::exists(dir / "device", ec);
  return c;
}

absl::StatusOr<InterfaceCounters> ReadInterfaceCounters(const FactsRoots& roots, const std::string& ifname) {
  ASSIGN_OR_RETURN(InterfaceCounters c, ReadInterfaceNetdevCounters(roots, ifname));
  const fs::path dir = fs::path(roots.sysfs_root) / "class" / "net" / ifname;
  if (IsRealSysfs(roots.sysfs_root)) {
    c.ethtool = ReadEthtoolIoctl(ifname, &c.ethtool_error);
  } else {
    const std::string path = (dir / "ethtool_stats").string();
    absl::StatusOr<std::string> text = ReadTrimmedFile(path);
    if (!text.ok()) {
      c.ethtool_error = "no ethtool statistics in the fake tree: " + StatusText(text.status());
    } else {
      ASSIGN_OR_RETURN(c.ethtool, ParseEthtoolStatsFile(path, *text));
    }
  }
  // The PCIe link of the function the netdev belongs to; virtual devices have no `device`.
  c.pcie_speed = ReadAttribute(dir / "device" / "current_link_speed");
  c.pcie_width = ReadAttribute(dir / "device" / "current_link_width");
  if (!c.pcie_speed.empty() && !c.pcie_width.empty()) c.pcie_gbps_ceiling = PcieGbpsCeiling(c.pcie_speed, c.pcie_width);
  return c;
}

std::map<std::string, uint64_t> CounterDelta(const std::map<std::string, uint64_t>& before,
                                             const std::map<std::string, uint64_t>& after) {
  std::map<std::string, uint64_t> out;
  for (const auto& [name, a] : after) {
    auto it = before.find(name);
    if (it == before.end() || a < it->second) continue;
    out[name] = a - it->second;
  }
  return out;
}

}  // namespace tandem::agentd
