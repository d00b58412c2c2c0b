// A stand-in for systemd's end of NOTIFY_SOCKET: a unix datagram socket the test binds, whose
// path goes into the environment of the code (or the child process) under test, and whose
// messages ("READY=1\nSTATUS=...", "WATCHDOG=1") the test reads back.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace tandem::testing {

class FakeNotifySocket {
 public:
  FakeNotifySocket();  // binds in a fresh temporary folder; fails the test when it cannot
  ~FakeNotifySocket();
  FakeNotifySocket(const FakeNotifySocket&) = delete;
  FakeNotifySocket& operator=(const FakeNotifySocket&) = delete;

  // The value for NOTIFY_SOCKET.
  const std::string& path() const { return path_; }

  // Every message received so far, each whole (one datagram); waits up to `timeout` for the
  // first one that contains `needle` and returns all read until then (empty when it never came).
  std::vector<std::string> WaitFor(const std::string& needle, std::chrono::milliseconds timeout);
  // The messages that arrive within `window`.
  std::vector<std::string> Drain(std::chrono::milliseconds window);

 private:
  std::optional<std::string> ReceiveBefore(std::chrono::steady_clock::time_point deadline);

  TempDir dir_;
  std::string path_;
  int fd_ = -1;
};

// How many of `messages` contain `needle`.
int CountContaining(const std::vector<std::string>& messages, const std::string& needle);

}  // namespace tandem::testing
