#include "http/event_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace tandem::http {
namespace {

// epoll tags of the two sockets that are not connections.
char kListenTag;
char kWakeTag;

constexpr size_t kReadChunk = 64 * 1024;
// Bytes read beyond the request being handled (the start of a pipelined one); past this the
// loop stops reading that socket until the response is done (it still sees a hang-up).
constexpr size_t kMaxPendingInput = 64 * 1024;
// Per readiness event, so that one fast sender cannot starve the other connections.
constexpr size_t kMaxReadPerEvent = 256 * 1024;
// Deadlines are checked this often; they are coarse by this much.
constexpr std::chrono::milliseconds kSweepInterval{50};
constexpr int kAcceptBatch = 64;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

Mailbox::~Mailbox() { ::close(wake_fd); }

void Mailbox::Post(std::shared_ptr<Connection> conn, bool reusable) {
  {
    std::lock_guard<std::mutex> l(mu);
    if (closed) return;  // the loop has ended: the connection closes with its last owner
    done.emplace_back(std::move(conn), reusable);
  }
  Wake();
}

void Mailbox::Wake() {
  const uint64_t one = 1;
  // Fails only when the counter would overflow: the loop is awake then anyway.
  (void)!::write(wake_fd, &one, sizeof(one));
}

EventLoop::EventLoop(ServerOptions options)
    : options_(std::move(options)), pool_(options_.max_in_flight) {}

EventLoop::~EventLoop() {
  StopListening();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void EventLoop::AddRoute(std::string method, std::string path, Route route) {
  routes_[{std::move(method), std::move(path)}] = std::make_shared<const Route>(std::move(route));
}

absl::Status EventLoop::Init(int listen_fd) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  const int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake < 0) {
    if (wake >= 0) ::close(wake);
    ::close(listen_fd);
    return absl::InternalError(std::string("epoll/eventfd: ") + std::strerror(errno));
  }
  mailbox_ = std::make_shared<Mailbox>(wake);
  listen_fd_ = listen_fd;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &kListenTag;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.ptr = &kWakeTag;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake, &ev);
  return absl::OkStatus();
}

void EventLoop::Run() {
  epoll_event events[128];
  next_sweep_ = Clock::now() + kSweepInterval;
  while (!exit_.load()) {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_sweep_ - Clock::now()).count();
    const int n = ::epoll_wait(epoll_fd_, events, 128, static_cast<int>(std::max<int64_t>(0, wait)));
    if (n < 0 && errno != EINTR) {
      TLOG(ERROR) << "http: epoll_wait: " << std::strerror(errno);
      std::this_thread::sleep_for(kSweepInterval);
    }
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &kListenTag) {
        Accept();
      } else if (tag == &kWakeTag) {
        uint64_t count;
        (void)!::read(mailbox_->wake_fd, &count, sizeof(count));
        DrainMailbox();
      } else {
        OnEvent(static_cast<Connection*>(tag), events[i].events);
      }
    }
    closing_.clear();
    if (stopping_.load() && !stop_seen_) {
      stop_seen_ = true;
      std::vector<ConnPtr> idle;
      for (auto& [p, c] : conns_) {
        if (c->state != Connection::State::kDispatched) idle.push_back(c);
      }
      for (const ConnPtr& c : idle) Close(c);
      closing_.clear();
    }
    const Clock::time_point now = Clock::now();
    if (now >= next_sweep_) {
      Sweep(now);
      closing_.clear();
      next_sweep_ = now + kSweepInterval;
    }
  }
  // Exit: nothing more comes back from the workers; clients of requests still in flight are
  // told (gone) and their sockets shut down, so blocked writes fail now. The sockets close
  // when the workers let go of them.
  {
    std::lock_guard<std::mutex> l(mailbox_->mu);
    mailbox_->closed = true;
    mailbox_->done.clear();
  }
  for (auto& [p, c] : conns_) {
    if (c->state == Connection::State::kDispatched) {
      c->MarkGone();
      ::shutdown(c->fd(), SHUT_RDWR);
    }
  }
  conns_.clear();
  std::lock_guard<std::mutex> l(stats_mu_);
  stats_.connections = 0;
}

void EventLoop::StopListening() {
  std::lock_guard<std::mutex> l(listen_mu_);
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);  // also leaves the epoll set (no other descriptor refers to it)
    listen_fd_ = -1;
  }
}

void EventLoop::BeginStop() {
  stopping_ = true;
  if (mailbox_) mailbox_->Wake();
}

bool EventLoop::WaitIdle(Clock::time_point deadline) {
  std::unique_lock<std::mutex> l(stats_mu_);
  return idle_cv_.wait_until(l, deadline, [&] { return stats_.in_flight == 0; });
}

void EventLoop::RequestExit() {
  exit_ = true;
  if (mailbox_) mailbox_->Wake();
}

ServerStats EventLoop::Stats() const {
  std::lock_guard<std::mutex> l(stats_mu_);
  return stats_;
}

// ---- Connections: admission ----

void EventLoop::Accept() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    int fd;
    {
      std::lock_guard<std::mutex> l(listen_mu_);
      if (listen_fd_ < 0) return;
      fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    }
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors: evict one connection; its descriptor is closed after this batch of
      // events, and the still-readable listening socket brings the loop back here.
      if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) && Admit()) return;
      // Out of descriptors with nothing to evict: a readable listening socket would wake the
      // loop at once, again and again; stop watching it until the next sweep.
      TLOG(WARN) << "http: accept: " << std::strerror(errno) << "; pausing accepts";
      std::lock_guard<std::mutex> l(listen_mu_);
      if (listen_fd_ >= 0) {
        epoll_event ev{};
        ev.data.ptr = &kListenTag;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
        accept_paused_ = true;
      }
      return;
    }
    if (stopping_.load() || (static_cast<int>(conns_.size()) >= options_.max_connections && !Admit())) {
      // Every connection has a request in flight: there is no one to make room for this one.
      const std::string busy = SerializeResponse(ErrorResponse(503, "too many connections; retry later"), false);
      (void)!::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      continue;
    }
    // One small write per streamed token: without TCP_NODELAY, Nagle's algorithm holds a chunk
    // until the client's delayed ACK of the previous one (up to 40 ms per token on Linux).
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_shared<Connection>(fd, next_seq_++, options_.limits, options_.write_timeout);
    SetDeadline(*c, Connection::Deadline::kHeader, options_.header_timeout);
    conns_.emplace(c.get(), c);
    SetInterest(*c, EPOLLIN | EPOLLRDHUP);
    std::lock_guard<std::mutex> l(stats_mu_);
    ++stats_.accepted_total;
    stats_.connections = static_cast<int64_t>(conns_.size());
  }
}

bool EventLoop::Admit() {
  ConnPtr oldest;
  for (auto& [p, c] : conns_) {
    if (c->state == Connection::State::kDispatched) continue;
    if (!oldest || c->seq() < oldest->seq()) oldest = c;
  }
  if (!oldest) return false;
  Close(oldest);
  std::lock_guard<std::mutex> l(stats_mu_);
  ++stats_.evicted_total;
  return true;
}

// ---- Connections: reading and framing ----

void EventLoop::OnEvent(Connection* raw, uint32_t events) {
  auto it = conns_.find(raw);
  if (it == conns_.end()) return;
  const ConnPtr c = it->second;
  if (events & EPOLLERR) {
    PeerClosed(c);
    return;
  }
  if ((events & EPOLLOUT) && c->state == Connection::State::kWriting) {
    if (Flush(c)) {
      FinishWrite(c);
      if (c->state == Connection::State::kReading) Advance(c);
    }
    if (c->state == Connection::State::kClosed) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) ReadInto(c, events);
  if (c->state != Connection::State::kClosed) UpdateInterest(*c);
}

void EventLoop::ReadInto(const ConnPtr& c, uint32_t events) {
  char buf[kReadChunk];
  size_t total = 0;
  while (total < kMaxReadPerEvent && c->state != Connection::State::kClosed) {
    const bool framing = c->state == Connection::State::kReading || c->state == Connection::State::kLingering;
    const size_t room = framing ? sizeof(buf) : kMaxPendingInput - std::min(kMaxPendingInput, c->in.size());
    if (room == 0) {
      // Not reading this socket now (a response is under way and input is buffered): a
      // hang-up still counts.
      if (events & (EPOLLRDHUP | EPOLLHUP)) PeerClosed(c);
      return;
    }
    const ssize_t n = ::recv(c->fd(), buf, std::min(room, sizeof(buf)), 0);
    if (n > 0) {
      total += static_cast<size_t>(n);
      if (c->state == Connection::State::kLingering) continue;  // dropped
      c->in.append(buf, static_cast<size_t>(n));
      if (c->state == Connection::State::kReading) Advance(c);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if ((events & EPOLLHUP) != 0) PeerClosed(c);
      return;
    }
    PeerClosed(c);  // n == 0 (the client closed its side) or a socket error
    return;
  }
}

void EventLoop::PeerClosed(const ConnPtr& c) {
  if (c->state != Connection::State::kDispatched) {
    Close(c);
    return;
  }
  // A request is in flight: tell its handler, and stop watching the socket (a closed peer
  // would report readiness forever); the worker still owns the response side.
  if (!c->gone()) {
    std::lock_guard<std::mutex> l(stats_mu_);
    ++stats_.client_gone_total;
  }
  c->MarkGone();
  if (c->registered) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd(), nullptr);
    c->registered = false;
  }
}

void EventLoop::Advance(const ConnPtr& c) {
  using Phase = RequestParser::Phase;
  while (c->state == Connection::State::kReading && !c->in.empty()) {
    const bool was_started = c->parser.started();
    const size_t used = c->parser.Feed(c->in);
    c->in.erase(0, used);
    // The head deadline of a keep-alive request runs from its first byte, not from the end of
    // the previous response.
    if (!was_started && c->parser.started() && c->deadline_kind == Connection::Deadline::kIdle) {
      SetDeadline(*c, Connection::Deadline::kHeader, options_.header_timeout);
    }
    const Phase phase = c->parser.phase();
    if (phase == Phase::kError) {
      RespondError(c, c->parser.error().status, c->parser.error().message, false, true);
      return;
    }
    if (phase == Phase::kHead) continue;
    // The head is complete.
    if (c->deadline_kind == Connection::Deadline::kHeader) {
      SetDeadline(*c, Connection::Deadline::kBody, options_.body_timeout);
    }
    const size_t want = static_cast<size_t>(c->parser.content_length().value_or(c->parser.request().body.size()));
    if (want > c->body_reserved && !ReserveBody(*c, want - c->body_reserved)) {
      RespondError(c, 503, "the server holds too many request bodies; retry later", false, true);
      return;
    }
    if (phase == Phase::kBody) {
      if (c->parser.request().expect_continue && !c->continue_sent) {
        c->continue_sent = true;
        // Tiny, into an empty send buffer: it fits. A client that gets no 100 sends anyway.
        (void)!::send(c->fd(), kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      continue;
    }
    Request request = c->parser.TakeRequest();
    c->parser.Reset();
    c->continue_sent = false;
    OnRequest(c, std::move(request));
  }
}

// ---- Requests ----

void EventLoop::OnRequest(const ConnPtr& c, Request request) {
  if (stopping_.load()) {
    ReleaseBody(*c);
    RespondError(c, 503, "the server is shutting down", false, false);
    return;
  }
  auto it = routes_.find({request.method, request.path});
  if (it == routes_.end()) {
    ReleaseBody(*c);
    std::string allow;
    for (const auto& [key, r] : routes_) {
      if (key.second == request.path) allow += (allow.empty() ? "" : ", ") + key.first;
    }
    if (allow.empty()) {
      RespondError(c, 404, "unknown route: " + request.method + " " + request.path, request.keep_alive, false);
    } else {
      Response r = ErrorResponse(405, "method " + request.method + " is not allowed on " + request.path);
      r.headers.emplace_back("Allow", allow);
      RespondFromLoop(c, std::move(r), request.keep_alive);
    }
    return;
  }
  const std::shared_ptr<const Route>& route = it->second;
  if (route->inline_handler) {
    Response r;
    try {
      r = route->inline_handler(request);
    } catch (const std::exception& e) {
      r = ErrorResponse(500, std::string("internal error: ") + e.what());
    }
    ReleaseBody(*c);
    RespondFromLoop(c, std::move(r), request.keep_alive);
    return;
  }
  {
    std::unique_lock<std::mutex> l(stats_mu_);
    if (stats_.in_flight >= options_.max_in_flight) {
      ++stats_.overloaded_total;
      l.unlock();
      ReleaseBody(*c);
      RespondError(c, options_.overload_status, "too many requests in flight; retry later", request.keep_alive, false);
      return;
    }
    ++stats_.in_flight;
  }
  Dispatch(c, route, std::move(request));
}

void EventLoop::Dispatch(const ConnPtr& c, const std::shared_ptr<const Route>& route, Request request) {
  c->state = Connection::State::kDispatched;
  c->deadline_kind = Connection::Deadline::kNone;
  UpdateInterest(*c);
  pool_.Submit([c, route, request = std::move(request), render = render_error_, mailbox = mailbox_]() mutable {
    bool reusable = false;
    {
      Exchange exchange(c, std::move(request));
      try {
        route->handler(exchange);
      } catch (const std::exception& e) {
        TLOG(ERROR) << "http: handler of " << exchange.request().path << " threw: " << e.what();
      }
      reusable = exchange.Finish([&render] {
        const std::string why = "internal error: the handler gave no response";
        return render ? (*render)(500, why) : Response{500, {}, "text/plain", why + "\n"};
      });
    }  // the request (and its body) is freed before the loop learns the exchange ended
    mailbox->Post(std::move(c), reusable);
  });
}

void EventLoop::DrainMailbox() {
  std::vector<std::pair<ConnPtr, bool>> done;
  {
    std::lock_guard<std::mutex> l(mailbox_->mu);
    done.swap(mailbox_->done);
  }
  for (auto& [c, reusable] : done) {
    {
      std::lock_guard<std::mutex> l(stats_mu_);
      if (--stats_.in_flight == 0) idle_cv_.notify_all();
    }
    ReleaseBody(*c);
    if (c->state == Connection::State::kClosed) continue;
    if (!reusable || c->gone() || stopping_.load()) {
      Close(c);
      continue;
    }
    c->state = Connection::State::kReading;
    SetDeadline(*c, Connection::Deadline::kIdle, options_.idle_timeout);
    Advance(c);  // a pipelined request may be waiting already
    if (c->state != Connection::State::kClosed) UpdateInterest(*c);
  }
}

// ---- Responses written by the loop ----

Response EventLoop::ErrorResponse(int status, const std::string& message) {
  Response r = render_error_ ? (*render_error_)(status, message) : Response{status, {}, "text/plain", message + "\n"};
  r.status = status;
  if ((status == 429 || status == 503) && !FindHeader(r.headers, "Retry-After")) {
    r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_seconds));
  }
  return r;
}

void EventLoop::RespondError(const ConnPtr& c, int status, const std::string& message, bool keep_alive, bool linger) {
  RespondFromLoop(c, ErrorResponse(status, message), keep_alive && !linger, linger);
}

void EventLoop::RespondFromLoop(const ConnPtr& c, Response response, bool keep_alive, bool linger) {
  keep_alive = keep_alive && !stopping_.load();
  c->out = SerializeResponse(response, keep_alive);
  c->out_offset = 0;
  c->close_after_write = !keep_alive;
  c->linger_after_write = linger;
  c->state = Connection::State::kWriting;
  SetDeadline(*c, Connection::Deadline::kWrite, options_.write_timeout);
  // The caller (Advance, or the mailbox) continues once the state is kReading again; writing
  // here first keeps a small response at one send and no epoll round.
  if (Flush(c)) FinishWrite(c);
}

bool EventLoop::Flush(const ConnPtr& c) {
  while (c->out_offset < c->out.size()) {
    const ssize_t n = ::send(c->fd(), c->out.data() + c->out_offset, c->out.size() - c->out_offset,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_offset += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      UpdateInterest(*c);  // wait for EPOLLOUT
      return false;
    }
    Close(c);
    return false;
  }
  return true;
}

void EventLoop::FinishWrite(const ConnPtr& c) {
  c->out.clear();
  c->out.shrink_to_fit();
  c->out_offset = 0;
  if (c->linger_after_write) {
    Linger(c);
  } else if (c->close_after_write) {
    Close(c);
  } else {
    c->state = Connection::State::kReading;
    SetDeadline(*c, Connection::Deadline::kIdle, options_.idle_timeout);
    UpdateInterest(*c);
  }
}

// After a refusal the rest of the request may still be arriving (a 62 MB body after its 413).
// Closing with unread input makes the kernel send a reset, which can destroy the response
// before the client reads it; so send FIN after the response, drop what still comes, and close
// when the client does or at the linger deadline.
void EventLoop::Linger(const ConnPtr& c) {
  ::shutdown(c->fd(), SHUT_WR);
  ReleaseBody(*c);
  c->state = Connection::State::kLingering;
  c->in.clear();
  c->in.shrink_to_fit();
  c->parser.Reset();
  SetDeadline(*c, Connection::Deadline::kLinger, options_.linger_timeout);
  UpdateInterest(*c);
}

// ---- Deadlines, interest, bookkeeping ----

void EventLoop::SetDeadline(Connection& c, Connection::Deadline kind, std::chrono::milliseconds after) {
  c.deadline_kind = kind;
  c.deadline = Clock::now() + after;
}

void EventLoop::Sweep(Clock::time_point now) {
  if (accept_paused_) {
    std::lock_guard<std::mutex> l(listen_mu_);
    accept_paused_ = false;
    if (listen_fd_ >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = &kListenTag;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    }
  }
  std::vector<ConnPtr> expired;
  for (auto& [p, c] : conns_) {
    if (c->deadline_kind != Connection::Deadline::kNone && now >= c->deadline) expired.push_back(c);
  }
  int timed_out = 0;
  for (const ConnPtr& c : expired) {
    const Connection::Deadline kind = c->deadline_kind;
    if (kind == Connection::Deadline::kHeader || kind == Connection::Deadline::kBody) {
      // A client that sent part of a request learns why (best effort: one send, no waiting).
      if (c->parser.started() || !c->in.empty()) {
        const std::string msg = SerializeResponse(
            ErrorResponse(408, kind == Connection::Deadline::kHeader ? "the request head took too long"
                                                                     : "the request body took too long"),
            false);
        (void)!::send(c->fd(), msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
    if (kind != Connection::Deadline::kIdle && kind != Connection::Deadline::kLinger) ++timed_out;
    Close(c);
  }
  if (timed_out > 0) {
    std::lock_guard<std::mutex> l(stats_mu_);
    stats_.timed_out_total += timed_out;
  }
}

void EventLoop::SetInterest(Connection& c, uint32_t events) {
  if (c.registered && c.epoll_events == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = &c;
  if (::epoll_ctl(epoll_fd_, c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd(), &ev) == 0) {
    c.registered = true;
    c.epoll_events = events;
  }
}

void EventLoop::UpdateInterest(Connection& c) {
  const uint32_t room = c.in.size() < kMaxPendingInput ? uint32_t{EPOLLIN} : 0u;
  switch (c.state) {
    case Connection::State::kReading:
    case Connection::State::kLingering:
      SetInterest(c, EPOLLIN | EPOLLRDHUP);
      break;
    case Connection::State::kWriting:
      SetInterest(c, room | EPOLLRDHUP | (c.out_offset < c.out.size() ? uint32_t{EPOLLOUT} : 0u));
      break;
    case Connection::State::kDispatched:
      if (!c.gone()) SetInterest(c, room | EPOLLRDHUP);
      break;
    case Connection::State::kClosed:
      break;
  }
}

void EventLoop::Close(const ConnPtr& c) {
  if (c->state == Connection::State::kClosed) return;
  if (c->registered) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd(), nullptr);
    c->registered = false;
  }
  ReleaseBody(*c);
  c->state = Connection::State::kClosed;
  c->deadline_kind = Connection::Deadline::kNone;
  closing_.push_back(c);  // events of this batch may still name it
  conns_.erase(c.get());
  std::lock_guard<std::mutex> l(stats_mu_);
  stats_.connections = static_cast<int64_t>(conns_.size());
}

bool EventLoop::ReserveBody(Connection& c, size_t bytes) {
  if (body_bytes_ + bytes > options_.max_buffered_body_bytes) return false;
  body_bytes_ += bytes;
  c.body_reserved += bytes;
  return true;
}

void EventLoop::ReleaseBody(Connection& c) {
  body_bytes_ -= c.body_reserved;
  c.body_reserved = 0;
}

}  // namespace tandem::http
