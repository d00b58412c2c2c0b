#include "http/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace tandem::http {

Connection::~Connection() { ::close(fd_); }

void Connection::MarkGone() {
  std::function<void()> cb;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (gone_.exchange(true)) return;
    cb = std::move(on_gone_);
    on_gone_ = nullptr;
  }
  if (cb) cb();
}

void Connection::SetGoneCallback(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!gone_.load()) {
      on_gone_ = std::move(callback);
      return;
    }
  }
  if (callback) callback();
}

bool Connection::WriteAll(std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    if (gone()) return false;
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    // Full send buffer: wait for room, in slices so that a client marked gone (or a server
    // stopping) ends the wait soon.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLOUT, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (rc < 0 && errno != EINTR) return false;
    if (rc > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
  }
  return true;
}

}  // namespace tandem::http
