// The server's event loop (internal; the contract is in http/server.h). One thread runs Run():
// it accepts, reads, frames, enforces deadlines and caps, answers inline routes and refusals,
// and hands complete requests to the worker pool. Workers hand connections back through the
// mailbox (a queue plus an eventfd that wakes the loop).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/connection.h"
#include "http/server.h"
#include "http/worker_pool.h"

namespace tandem::http {

// Worker -> loop: connections whose exchange has ended. Outlives the loop when a stuck worker
// still holds it (then its posts are dropped, and the connection closes with its last owner).
struct Mailbox {
  explicit Mailbox(int wake_fd) : wake_fd(wake_fd) {}
  ~Mailbox();
  void Post(std::shared_ptr<Connection> conn, bool reusable);
  void Wake();

  const int wake_fd;  // eventfd, registered in the loop's epoll set
  std::mutex mu;
  std::vector<std::pair<std::shared_ptr<Connection>, bool>> done;  // under mu
  bool closed = false;                                              // under mu: the loop has ended
};

struct Route {
  Handler handler;               // worker route
  InlineHandler inline_handler;  // or inline route
};

class EventLoop {
 public:
  explicit EventLoop(ServerOptions options);
  ~EventLoop();

  void AddRoute(std::string method, std::string path, Route route);
  void SetErrorRenderer(ErrorRenderer renderer) {
    render_error_ = std::make_shared<const ErrorRenderer>(std::move(renderer));
  }
  // Takes the bound, listening socket and prepares the epoll set.
  absl::Status Init(int listen_fd);
  void Run();  // until RequestExit()

  void StopListening();
  // No new requests: close what is not in flight; later exchanges end their connection.
  void BeginStop();
  // Waits until no request is in flight or `deadline`; true when none is.
  bool WaitIdle(Clock::time_point deadline);
  // Ends Run(): clients of requests still in flight are marked gone, their sockets shut down.
  void RequestExit();
  // After Run() returned: ends the worker threads by `deadline` (detaching stuck ones).
  bool StopWorkers(Clock::time_point deadline) { return pool_.Stop(deadline); }

  ServerStats Stats() const;

 private:
  using ConnPtr = std::shared_ptr<Connection>;

  void Accept();
  bool Admit();  // makes room for one more connection; false when there is none
  void OnEvent(Connection* c, uint32_t events);
  void ReadInto(const ConnPtr& c, uint32_t events);
  void PeerClosed(const ConnPtr& c);
  void Advance(const ConnPtr& c);
  void OnRequest(const ConnPtr& c, Request request);
  void Dispatch(const ConnPtr& c, const std::shared_ptr<const Route>& route, Request request);
  void RespondFromLoop(const ConnPtr& c, Response response, bool keep_alive, bool linger = false);
  // A refusal; `linger`: part of the request may be unread (drop it before closing).
  void RespondError(const ConnPtr& c, int status, const std::string& message, bool keep_alive, bool linger);
  bool Flush(const ConnPtr& c);  // true when the whole response is written
  void FinishWrite(const ConnPtr& c);  // after Flush: keep reading, linger or close
  void DrainMailbox();
  void Sweep(Clock::time_point now);
  void Close(const ConnPtr& c);
  void Linger(const ConnPtr& c);
  void SetInterest(Connection& c, uint32_t events);
  void UpdateInterest(Connection& c);
  bool ReserveBody(Connection& c, size_t bytes);
  void ReleaseBody(Connection& c);
  Response ErrorResponse(int status, const std::string& message);
  void SetDeadline(Connection& c, Connection::Deadline kind, std::chrono::milliseconds after);

  const ServerOptions options_;
  int epoll_fd_ = -1;
  std::mutex listen_mu_;  // held only around non-blocking calls: StopListening never waits long
  int listen_fd_ = -1;
  bool accept_paused_ = false;  // out of file descriptors: accept again at the next sweep
  std::shared_ptr<Mailbox> mailbox_;
  WorkerPool pool_;
  // (method, path) -> route; shared with the tasks that run them.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const Route>> routes_;
  std::shared_ptr<const ErrorRenderer> render_error_;
  std::unordered_map<Connection*, ConnPtr> conns_;
  std::vector<ConnPtr> closing_;  // closed in this batch of events; freed after it
  uint64_t next_seq_ = 0;
  size_t body_bytes_ = 0;
  Clock::time_point next_sweep_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> exit_{false};
  bool stop_seen_ = false;  // the loop has closed what was not in flight
  mutable std::mutex stats_mu_;
  std::condition_variable idle_cv_;  // in_flight reached 0
  ServerStats stats_;                // under stats_mu_
};

}  // namespace tandem::http
