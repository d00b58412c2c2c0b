#include "tests/common/notify_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

namespace tandem::testing {

FakeNotifySocket::FakeNotifySocket() : path_(dir_ / "notify.sock") {
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  EXPECT_LT(path_.size(), sizeof(addr.sun_path)) << path_;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
}

FakeNotifySocket::~FakeNotifySocket() {
  if (fd_ >= 0) close(fd_);
}

std::optional<std::string> FakeNotifySocket::ReceiveBefore(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) return std::string(buf, static_cast<size_t>(n));
  }
}

std::vector<std::string> FakeNotifySocket::WaitFor(const std::string& needle, std::chrono::milliseconds timeout) {
  std::vector<std::string> got;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::optional<std::string> m = ReceiveBefore(deadline)) {
    got.push_back(std::move(*m));
    if (got.back().find(needle) != std::string::npos) return got;
  }
  return {};
}

std::vector<std::string> FakeNotifySocket::Drain(std::chrono::milliseconds window) {
  std::vector<std::string> got;
  const auto deadline = std::chrono::steady_clock::now() + window;
  while (std::optional<std::string> m = ReceiveBefore(deadline)) got.push_back(std::move(*m));
  return got;
}

int CountContaining(const std::vector<std::string>& messages, const std::string& needle) {
  int n = 0;
  for (const auto& m : messages) n += m.find(needle) != std::string::npos;
  return n;
}

}  // namespace tandem::testing
