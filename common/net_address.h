// What kind of address a listen or dial address is. Pure string and inet_pton work: no lookups.
#pragma once

#include <string>

namespace tandem {

// True for 127.0.0.0/8, ::1 and "localhost" (with or without a port; IPv6 in brackets or not).
// A name that would need a DNS lookup is not loopback.
bool IsLoopbackHost(const std::string& host_or_address);

// The host part of "host:port" / "[v6]:port" (brackets removed); a bare host is returned as is.
std::string HostOf(const std::string& host_port);

}  // namespace tandem
