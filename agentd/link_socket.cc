#include "agentd/link_socket.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tandem::agentd {

constexpr int kPollSliceMs = 50;  // how often blocked loops look at the stop condition

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string Errno(const std::string& what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

absl::StatusOr<sockaddr_in> Ipv4Sockaddr(const std::string& address, uint32_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: \"", address, "\""));
  }
  return sa;
}

void BindToDevice(int fd, const std::string& interface) {
  (void)setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, interface.c_str(), static_cast<socklen_t>(interface.size()));
}

absl::StatusOr<Fd> BoundSocket(const std::string& interface, const std::string& ipv4) {
  ASSIGN_OR_RETURN(sockaddr_in sa, Ipv4Sockaddr(ipv4, 0));
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.get() < 0) return absl::InternalError(Errno("socket"));
  BindToDevice(s.get(), interface);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return absl::UnavailableError(Errno(absl::StrCat("bind to ", ipv4)));
  }
  return s;
}

absl::Status ConnectWithin(int fd, const sockaddr_in& to, std::chrono::milliseconds timeout,
                           absl::FunctionRef<bool()> stopped) {
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0) return absl::OkStatus();
  if (errno != EINPROGRESS) return absl::UnavailableError(std::strerror(errno));
  if (!WaitFor(fd, POLLOUT, std::chrono::steady_clock::now() + timeout, stopped)) {
    return absl::DeadlineExceededError(absl::StrCat("no answer within ", timeout.count() / 1000, " s"));
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return absl::UnavailableError(std::strerror(err));
  return absl::OkStatus();
}

bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point until, absl::FunctionRef<bool()> stopped) {
  while (!stopped() && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, kPollSliceMs);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
  return false;
}

absl::Status RecvExactly(int fd, char* out, size_t size, std::chrono::steady_clock::time_point until,
                         absl::FunctionRef<bool()> stopped) {
  size_t have = 0;
  while (have < size) {
    if (!WaitFor(fd, POLLIN, until, stopped)) {
      return absl::DeadlineExceededError("the other end did not answer in time");
    }
    const ssize_t n = ::recv(fd, out + have, size - have, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) return absl::UnavailableError("the other end closed the stream");
    if (n < 0) return absl::UnavailableError(Errno("recv"));
    have += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace tandem::agentd
