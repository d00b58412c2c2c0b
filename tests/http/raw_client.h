// A raw HTTP/1.1 client over a loopback socket for the server tests: it sends exactly the bytes
// a test gives it (slow, malformed, pipelined) and reads responses with a deadline.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::http::testing {

struct RawResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // de-chunked
  bool HasHeader(std::string_view line) const { return head.find(line) != std::string::npos; }
};

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads more bytes into the buffer; false at EOF, on an error, or at the deadline.
  bool ReadMore(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(buf, static_cast<size_t>(n));
    return true;
  }

  // True when the server closed the connection (EOF or reset) within `timeout`; bytes that
  // arrive first (a 408, say) are kept.
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!eof_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      if (!ReadMore(left) && !eof_) return false;
    }
    return true;
  }

  // One whole response (Content-Length, chunked, or until EOF), or nullopt at the deadline.
  std::optional<RawResponse> ReadResponse(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    auto more = [&] {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      return left.count() > 0 && ReadMore(left);
    };
    size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!more()) return std::nullopt;
    }
    RawResponse r;
    r.head = buf_.substr(0, head_end + 2);
    r.status = std::atoi(r.head.c_str() + 9);
    buf_.erase(0, head_end + 4);
    const size_t cl = Lower(r.head).find("content-length: ");
    if (cl != std::string::npos) {
      const size_t n = std::strtoull(r.head.c_str() + cl + 16, nullptr, 10);
      while (buf_.size() < n) {
        if (!more()) return std::nullopt;
      }
      r.body = buf_.substr(0, n);
      buf_.erase(0, n);
    } else if (Lower(r.head).find("transfer-encoding: chunked") != std::string::npos) {
      for (;;) {
        size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos) {
          if (!more()) return std::nullopt;
        }
        const size_t size = std::strtoull(buf_.c_str(), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2) {
          if (!more()) return std::nullopt;
        }
        r.body += buf_.substr(eol + 2, size);
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0) break;
      }
    } else if (r.status != 100) {
      while (more()) {
      }
      if (!eof_) return std::nullopt;
      r.body = std::move(buf_);
      buf_.clear();
    }
    return r;
  }

  const std::string& buffered() const { return buf_; }

 private:
  static std::string Lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

inline std::string GetRequest(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: t\r\n" + extra + "\r\n";
}

inline std::string PostRequest(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "\r\n" + body;
}

}  // namespace tandem::http::testing
