// The socket plumbing both of linktest's transfers use (agentd/link_transfer.cc for the TCP
// streams, agentd/link_rdma.cc for the RDMA control stream): an owning descriptor (also the
// ethtool ioctl's socket in agentd/link_counters.cc), errno text, an IPv4 sockaddr from text, a
// socket bound to one interface, a connect and an exact read with deadlines, and the poll under
// them that keeps looking at a stop condition, so that no blocked call outlives its deadline or
// a cancel.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::agentd {

// Owns one file descriptor; closes it when dropped or reset.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

// "what: <strerror(errno)>".
std::string Errno(const std::string& what);

// `address` (dotted IPv4) and `port`; INVALID_ARGUMENT when the text is no IPv4 address.
absl::StatusOr<sockaddr_in> Ipv4Sockaddr(const std::string& address, uint32_t port);

// Keeps the socket on the interface the half is about even when another interface holds a route
// to the same subnet. Needs CAP_NET_RAW; without it the bind to the local address has to do.
void BindToDevice(int fd, const std::string& interface);

// A non-blocking TCP socket bound to `interface` (where allowed, BindToDevice) and `ipv4`, port 0.
absl::StatusOr<Fd> BoundSocket(const std::string& interface, const std::string& ipv4);

// Connects the non-blocking `fd` to `to` within `timeout`, giving up early when `stopped()`:
// UNAVAILABLE with the reason, or DEADLINE_EXCEEDED "no answer within N s". Callers put what they
// connected to in front of the message.
absl::Status ConnectWithin(int fd, const sockaddr_in& to, std::chrono::milliseconds timeout,
                           absl::FunctionRef<bool()> stopped);

// Polls `fd` for `events` in 50 ms slices until one arrives (true), `stopped()` is true or
// `until` passes (false).
bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point until, absl::FunctionRef<bool()> stopped);

// Reads exactly `size` bytes of the stream `fd` into `out`, waiting as WaitFor does.
// DEADLINE_EXCEEDED when `until` passes or `stopped()` first ("the other end did not answer in
// time"); UNAVAILABLE when the other end closed the stream or recv failed.
absl::Status RecvExactly(int fd, char* out, size_t size, std::chrono::steady_clock::time_point until,
                         absl::FunctionRef<bool()> stopped);

}  // namespace tandem::agentd
