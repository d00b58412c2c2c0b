// A small HTTP/1.1 server built to stay up under hostile or careless clients (issue 12).
//
// One event-loop thread (epoll) owns the listening socket and every read: it frames requests
// with the RequestParser and only then hands a complete request to a worker thread, so a slow
// client costs a socket and a few KB, never a thread. Every connection has a deadline for
// whatever it is doing — the whole head (from accept, or from the first byte of a keep-alive
// request: a trickle does not extend it), the body, the idle time between keep-alive requests,
// and each response write. Connections are capped; at the cap a new connection is admitted by
// closing the oldest one that has no request in flight (idle, or still sending its request), so
// slow senders cannot lock others out. Requests in flight are capped too, and beyond the cap the
// loop itself answers 429 (or 503) with Retry-After, without a worker. Cheap routes (health,
// metrics) run on the loop and answer while every worker is busy.
//
// While a request is in flight the loop keeps watching its socket: when the client goes away
// (FIN, reset, error) the exchange's client_gone() turns true and its callback runs, so a
// handler can cancel work nobody will read. A client that half-closes its side after sending a
// request is treated as gone.
//
// Responses are written by the handler's thread (fixed body, or a chunked stream for SSE) with
// a write deadline per write. StopListening() frees the port at once and never blocks; Stop()
// waits a bounded time for handlers and then leaves stuck ones behind.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "http/message.h"
#include "http/request_parser.h"

namespace tandem::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: the OS picks (read it back with port())
  ParserLimits limits;
  std::chrono::milliseconds header_timeout{10000};  // the whole head, from accept or the first byte
  std::chrono::milliseconds body_timeout{60000};    // the whole body, from the end of the head
  std::chrono::milliseconds idle_timeout{30000};    // keep-alive: between the end of a response and the next request
  std::chrono::milliseconds write_timeout{30000};   // each response write (a whole body, or one streamed chunk)
  std::chrono::milliseconds linger_timeout{2000};   // reading (and dropping) a refused body after the error response
  int max_connections = 1024;
  int max_in_flight = 64;  // requests handed to workers (= the most worker threads)
  // Request bodies held in memory at once (being received or being handled); a request whose
  // body would pass this is answered 503 before its body is read.
  size_t max_buffered_body_bytes = size_t{256} << 20;
  int overload_status = 429;  // the answer beyond max_in_flight (429 or 503)
  int retry_after_seconds = 1;
};

struct ServerStats {
  int64_t connections = 0;       // open now
  int64_t in_flight = 0;         // requests with a worker now
  int64_t accepted_total = 0;
  int64_t evicted_total = 0;     // closed to admit a newer connection at max_connections
  int64_t timed_out_total = 0;   // closed at a header, body, idle or write deadline
  int64_t overloaded_total = 0;  // answered overload_status at max_in_flight
  int64_t client_gone_total = 0; // clients that went away with a request in flight
};

class Connection;  // http/connection.h
class EventLoop;   // http/event_loop.h

// One request being answered on a worker thread. Exactly one of Respond() or BeginStream() (then
// Write()* and EndStream()) should be called; a handler that returns without answering gets a
// 500. Writes return false once the client is gone or a write deadline passed: stop then.
class Exchange {
 public:
  Exchange(std::shared_ptr<Connection> connection, Request request);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const Request& request() const { return request_; }
  // The loop saw the client go away (or a write to it failed).
  bool client_gone() const;
  // Runs `callback` once when the client goes away: on the event loop (it must not block) or,
  // when the client is already gone, right here. Replaces an earlier callback.
  void OnClientGone(std::function<void()> callback);

  bool Respond(const Response& response);
  // Starts a streamed body: chunked for HTTP/1.1, close-delimited for HTTP/1.0.
  bool BeginStream(int status, const Headers& headers, std::string_view content_type);
  bool Write(std::string_view data);
  bool EndStream();

  // Called by the server after the handler returned: sends `fallback()` (a 500) if nothing
  // was sent, and says whether the connection can carry another request.
  bool Finish(const std::function<Response()>& fallback);

 private:
  bool Send(std::string_view bytes);

  std::shared_ptr<Connection> conn_;
  Request request_;
  bool responded_ = false, streaming_ = false, stream_ended_ = false, chunked_ = false, failed_ = false;
  bool keep_alive_ = true;
};

using Handler = std::function<void(Exchange&)>;                  // runs on a worker thread
using InlineHandler = std::function<Response(const Request&)>;   // runs on the event loop: quick, never blocks
// The response the server makes itself (parser errors, unknown routes, overload, deadlines);
// the caller adds its own body format. `status` >= 400.
using ErrorRenderer = std::function<Response(int status, const std::string& message)>;

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // Stop(0) when still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Routes match method and path exactly; register before Start().
  void Handle(std::string method, std::string path, Handler handler);
  void HandleInline(std::string method, std::string path, InlineHandler handler);
  void SetErrorRenderer(ErrorRenderer renderer);

  // Binds (SO_REUSEADDR), listens, starts the loop; returns once connections are accepted.
  absl::Status Start();
  int port() const { return port_; }

  // Closes the listening socket now (the port is free when this returns); never blocks. Open
  // connections keep being served.
  void StopListening();
  // StopListening, closes connections without a request in flight, lets handlers in flight
  // finish until `deadline`, then marks their clients gone, closes their sockets and stops the
  // loop. Returns false when a handler had not returned by then: it is left running (with what
  // it captured), so the caller must keep what its handlers use alive.
  bool Stop(std::chrono::milliseconds deadline);

  ServerStats Stats() const;

 private:
  struct PendingRoute {
    std::string method, path;
    Handler handler;
    InlineHandler inline_handler;
  };
  ServerOptions options_;
  std::vector<PendingRoute> routes_;  // handed to the loop by Start()
  ErrorRenderer render_error_;
  std::shared_ptr<EventLoop> loop_;
  std::thread thread_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace tandem::http
