// One accepted TCP connection (internal to the server). Shared between the event loop, which owns
// its reads and its state, and at most one worker thread at a time, which writes the response of
// the request it was handed. The socket is closed when the last owner lets go, so a worker never
// writes to a number the loop has already closed and the kernel reused.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "http/request_parser.h"

namespace tandem::http {

using Clock = std::chrono::steady_clock;

class Connection {
 public:
  Connection(int fd, uint64_t seq, const ParserLimits& limits, std::chrono::milliseconds write_timeout)
      : parser(limits), fd_(fd), seq_(seq), write_timeout_(write_timeout) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return fd_; }
  uint64_t seq() const { return seq_; }  // accept order: smaller = older
  std::chrono::milliseconds write_timeout() const { return write_timeout_; }

  // ---- Shared with the worker (thread-safe) ----
  bool gone() const { return gone_.load(std::memory_order_acquire); }
  // Marks the client gone and runs the callback (once, outside the lock). Idempotent.
  void MarkGone();
  // Runs `callback` when the client goes away; at once (on this thread) if it already has.
  void SetGoneCallback(std::function<void()> callback);
  // Writes all of `bytes` (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE) before
  // `deadline`, waiting for the socket to drain when it is full. False on an error, at the
  // deadline, or once the client is gone.
  bool WriteAll(std::string_view bytes, Clock::time_point deadline);

  // ---- Event-loop state (the loop thread only) ----
  enum class State {
    kReading,     // framing a request (or idle between keep-alive requests)
    kWriting,     // the loop is writing a response it made (inline route, error, overload)
    kDispatched,  // a worker has the request and writes its response
    kLingering,   // after a refusal: reading and dropping the rest of the request, then close
    kClosed,
  };
  enum class Deadline { kNone, kHeader, kBody, kIdle, kWrite, kLinger };
  State state = State::kReading;
  Deadline deadline_kind = Deadline::kHeader;
  Clock::time_point deadline;
  RequestParser parser;
  std::string in;            // bytes read but not yet framed (the start of a pipelined request)
  std::string out;           // the loop's response being written
  size_t out_offset = 0;
  bool close_after_write = false;
  bool linger_after_write = false;  // the request may be partly unread: drop the rest before closing
  bool continue_sent = false;      // "100 Continue" for this request
  size_t body_reserved = 0;        // bytes of ServerOptions::max_buffered_body_bytes held
  uint32_t epoll_events = 0;       // the interest set registered now
  bool registered = false;         // in the epoll set

 private:
  const int fd_;
  const uint64_t seq_;
  const std::chrono::milliseconds write_timeout_;
  std::atomic<bool> gone_{false};
  std::mutex mu_;
  std::function<void()> on_gone_;  // under mu_
};

}  // namespace tandem::http
