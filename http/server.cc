#include "http/server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/statusor.h"
#include "common/log.h"
#include "http/event_loop.h"

namespace tandem::http {
namespace {

// Each connection is a descriptor. Raising the soft limit to the hard one is harmless (Go does it
// for every program); below what max_connections needs, the cap is lowered instead, so that the
// server evicts connections rather than failing accept with EMFILE.
int FitConnectionsToDescriptorLimit(int wanted) {
  constexpr int kSpare = 128;  // the engine, logs, gRPC and the like
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return wanted;
  const rlim_t need = static_cast<rlim_t>(wanted) + kSpare;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? need : std::min(need, rl.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    const int fit = std::max<int>(16, static_cast<int>(rl.rlim_cur) - kSpare);
    TLOG(WARN) << "http: the descriptor limit (" << rl.rlim_cur << ") allows " << fit << " connections, not "
               << wanted << " (raise LimitNOFILE)";
    return fit;
  }
  return wanted;
}

// A bound, listening, non-blocking socket for host:port.
absl::StatusOr<int> Listen(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (gai != 0) return absl::InvalidArgumentError("cannot resolve " + host + ": " + gai_strerror(gai));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    // A burst of new connections must queue in the kernel, not be dropped (SYN retries cost 1 s).
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError("cannot listen on " + host + ":" + service + ": " + why +
                                  " (in use, or not an address of this machine)");
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() {
  if (!stopped_ && thread_.joinable()) Stop(std::chrono::milliseconds(0));
}

void Server::Handle(std::string method, std::string path, Handler handler) {
  routes_.push_back({std::move(method), std::move(path), std::move(handler), nullptr});
}

void Server::HandleInline(std::string method, std::string path, InlineHandler handler) {
  routes_.push_back({std::move(method), std::move(path), nullptr, std::move(handler)});
}

void Server::SetErrorRenderer(ErrorRenderer renderer) { render_error_ = std::move(renderer); }

absl::Status Server::Start() {
  if (loop_) return absl::FailedPreconditionError("the HTTP server is already started");
  ServerOptions o = options_;
  o.max_connections = FitConnectionsToDescriptorLimit(std::max(1, o.max_connections));
  o.max_in_flight = std::max(1, o.max_in_flight);
  auto fd = Listen(o.host, o.port, &port_);
  if (!fd.ok()) return fd.status();
  loop_ = std::make_shared<EventLoop>(o);
  for (const PendingRoute& r : routes_) loop_->AddRoute(r.method, r.path, Route{r.handler, r.inline_handler});
  if (render_error_) loop_->SetErrorRenderer(render_error_);
  if (absl::Status st = loop_->Init(*fd); !st.ok()) {
    loop_.reset();
    return st;
  }
  // The socket already listens: connections made before the thread runs wait in the backlog.
  thread_ = std::thread([loop = loop_] { loop->Run(); });
  return absl::OkStatus();
}

void Server::StopListening() {
  if (loop_) loop_->StopListening();
}

bool Server::Stop(std::chrono::milliseconds deadline) {
  if (!loop_ || stopped_) return true;
  stopped_ = true;
  const Clock::time_point end = Clock::now() + deadline;
  loop_->StopListening();
  loop_->BeginStop();
  const bool idle = loop_->WaitIdle(end);
  loop_->RequestExit();
  if (thread_.joinable()) thread_.join();  // the loop never blocks: this is quick
  // Handlers still running have just seen their clients gone and their sockets shut down;
  // give them a moment to notice before leaving them behind.
  const bool workers = loop_->StopWorkers(std::max(end, Clock::now() + std::chrono::milliseconds(200)));
  return idle || workers;
}

ServerStats Server::Stats() const { return loop_ ? loop_->Stats() : ServerStats{}; }

}  // namespace tandem::http
