#include "common/net_address.h"

#include <arpa/inet.h>

namespace tandem {

std::string HostOf(const std::string& host_port) {
  std::string host = host_port;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return close == std::string::npos ? host.substr(1) : host.substr(1, close - 1);
  }
  const size_t colon = host.rfind(':');
  // One colon: host:port. More: a bare IPv6 address without a port.
  if (colon != std::string::npos && host.find(':') == colon) host = host.substr(0, colon);
  return host;
}

bool IsLoopbackHost(const std::string& host_or_address) {
  const std::string host = HostOf(host_or_address);
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

}  // namespace tandem
