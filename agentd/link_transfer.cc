#include "agentd/link_transfer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // its tcp_info has tcpi_segs_out; glibc's netinet/tcp.h lags
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agentd/auth.h"
#include "agentd/link_counters.h"
#include "agentd/link_socket.h"
#include "common/status.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kConnectTimeout{5000};
constexpr auto kSendStall = std::chrono::seconds(2);
constexpr auto kDrainTimeout = std::chrono::seconds(5);
constexpr size_t kSendChunk = 1 << 20;
constexpr size_t kRecvChunk = 256 << 10;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

absl::Status CheckLimits(const std::string& token, uint32_t streams, uint32_t duration_ms, int ends, const char* what) {
  if (token.size() != kLinkTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("token must be ", kLinkTokenBytes, " bytes, got ", token.size()));
  }
  if (streams < 1 || streams > kLinkMaxStreams) {
    return absl::InvalidArgumentError(absl::StrCat("streams must be 1..", kLinkMaxStreams, ", got ", streams));
  }
  if (duration_ms < kLinkMinDurationMs || duration_ms > kLinkMaxDurationMs) {
    return absl::InvalidArgumentError(absl::StrCat("duration must be 1..60 s, got ", duration_ms, " ms"));
  }
  if (ends < 1 || ends > kLinkMaxEndpoints) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected 1..", kLinkMaxEndpoints, ", got ", ends));
  }
  return absl::OkStatus();
}

// The local address `address` on `interface`, or why the request may not use it.
absl::StatusOr<LocalIpv4> FindLocal(const std::vector<LocalIpv4>& local, const std::string& interface,
                                    const std::string& address) {
  std::vector<std::string> has;
  bool exists = false;
  for (const LocalIpv4& l : local) {
    if (l.interface != interface) continue;
    exists = true;
    if (l.address == address) return l;
    has.push_back(absl::StrCat(l.address, "/", l.prefix));
  }
  if (!exists) {
    return absl::InvalidArgumentError(absl::StrCat("interface \"", interface, "\" does not exist here or has no IPv4"));
  }
  return absl::InvalidArgumentError(absl::StrCat("interface \"", interface, "\" does not hold ", address, " (it has ",
                                                 absl::StrJoin(has, ", "), ")"));
}

// A virtual interface (veth, bridge, loopback: no device) reports a speed the kernel made up
// (veth: always 10000) rather than one it negotiated; judging a transfer against it would call
// every busy veth "not sending". Such speeds are left unknown.
v1::LinkCounterDelta Delta(const absl::StatusOr<InterfaceCounters>& before,
                           const absl::StatusOr<InterfaceCounters>& after) {
  v1::LinkCounterDelta d;
  d.set_speed_mbps(-1);
  if (!before.ok() || !after.ok()) {
    d.set_error(std::string(before.ok() ? after.status().message() : before.status().message()));
    return d;
  }
  for (const auto& [k, v] : CounterDelta(before->netdev, after->netdev)) (*d.mutable_netdev())[k] = v;
  for (const auto& [k, v] : CounterDelta(before->ethtool, after->ethtool)) (*d.mutable_ethtool())[k] = v;
  d.set_ethtool_error(after->ethtool_error);
  d.set_speed_mbps(after->has_device ? after->speed_mbps : -1);
  d.set_pcie_gbps_ceiling(after->pcie_gbps_ceiling);
  return d;
}

}  // namespace

std::vector<LocalIpv4> ListLocalIpv4() {
  std::vector<LocalIpv4> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    LocalIpv4 l;
    l.interface = a->ifa_name;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    l.address = text;
    if (a->ifa_netmask != nullptr) {
      l.prefix = __builtin_popcount(reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr);
    }
    out.push_back(std::move(l));
  }
  freeifaddrs(list);
  return out;
}

bool SameIpv4Subnet(const LocalIpv4& net, const std::string& address) {
  in_addr a{}, b{};
  if (inet_pton(AF_INET, net.address.c_str(), &a) != 1 || inet_pton(AF_INET, address.c_str(), &b) != 1) return false;
  if (net.prefix <= 0) return true;
  const uint32_t mask = net.prefix >= 32 ? 0xffffffffu : ~(0xffffffffu >> net.prefix);
  return (ntohl(a.s_addr) & mask) == (ntohl(b.s_addr) & mask);
}

// ---------------------------------------------------------------------------------------------
// Receiver

struct LinkReceiver::Endpoint {
  std::string interface;
  Fd listener;
  uint32_t port = 0;
  absl::StatusOr<InterfaceCounters> before = absl::UnknownError("not read");
  std::atomic<uint32_t> slots{0};     // connections that sent the token (may exceed streams)
  std::atomic<uint32_t> finished{0};  // accepted connections the sender closed
  std::atomic<uint32_t> refused{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<int64_t> first_ns{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> last_ns{0};
  std::atomic<int> expected{-1};      // streams the sender connected here; -1 until a header said
  std::vector<std::thread> readers;   // touched by this endpoint's acceptor thread only
  std::unique_ptr<RdmaReceiveHalf> rdma;  // null: no RDMA on this half (rdma_info.error says why)
  v1::LinkRdmaQp rdma_info;
  v1::LinkRdmaResult rdma_result;
};

LinkReceiver::LinkReceiver(const FactsRoots& roots, const v1::LinkReceiveRequest& request, LinkTransport transport)
    : roots_(roots),
      token_(request.token()),
      streams_(request.streams()),
      transport_(transport),
      // With both transports the sender writes over RDMA for another duration after TCP.
      deadline_(Clock::now() +
                std::chrono::milliseconds(request.duration_ms()) * (transport == LinkTransport::kBoth ? 2 : 1) +
                kLinkReceiveGrace) {}

LinkReceiver::~LinkReceiver() = default;

absl::StatusOr<std::unique_ptr<LinkReceiver>> LinkReceiver::Open(const FactsRoots& roots,
                                                                 const v1::LinkReceiveRequest& request,
                                                                 const std::vector<LocalIpv4>& local) {
  RETURN_IF_ERROR(CheckLimits(request.token(), request.streams(), request.duration_ms(), request.endpoints_size(),
                              "endpoints"));
  ASSIGN_OR_RETURN(LinkTransport transport, ParseLinkTransport(request.transport()));
  std::unique_ptr<LinkReceiver> r(new LinkReceiver(roots, request, transport));
  for (const v1::LinkEndpoint& e : request.endpoints()) {
    ASSIGN_OR_RETURN(LocalIpv4 l, FindLocal(local, e.interface(), e.ipv4()));
    ASSIGN_OR_RETURN(sockaddr_in sa, Ipv4Sockaddr(l.address, 0));
    auto ep = std::make_unique<Endpoint>();
    ep->interface = l.interface;
    ASSIGN_OR_RETURN(ep->rdma, RdmaReceiveHalf::Open(transport, roots, l.interface, l.address, &ep->rdma_info));
    if (transport == LinkTransport::kRdma) {
      ep->expected.store(0);  // no TCP streams come
      r->endpoints_.push_back(std::move(ep));
      continue;
    }
    ep->listener = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (ep->listener.get() < 0) return absl::InternalError(Errno("socket"));
    BindToDevice(ep->listener.get(), l.interface);
    if (::bind(ep->listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::listen(ep->listener.get(), 64) != 0) {
      return absl::InternalError(Errno(absl::StrCat("listen on ", l.address, " (", l.interface, ")")));
    }
    socklen_t len = sizeof(sa);
    ::getsockname(ep->listener.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    ep->port = ntohs(sa.sin_port);
    r->endpoints_.push_back(std::move(ep));
  }
  for (auto& ep : r->endpoints_) ep->before = ReadInterfaceCounters(roots, ep->interface);
  return r;
}

v1::LinkListening LinkReceiver::Listening() const {
  v1::LinkListening out;
  for (const auto& ep : endpoints_) {
    out.add_ports(ep->port);
    if (transport_ != LinkTransport::kTcp) *out.add_rdma() = ep->rdma_info;
  }
  return out;
}

void LinkReceiver::ReadConnection(Endpoint* ep, int raw_fd, const std::atomic<bool>& stop) {
  Fd fd(raw_fd);
  // The token, then one byte per endpoint: how many streams the sender connected to each. A
  // connection without both, or one more than `streams`, is refused.
  std::string got(token_.size(), '\0');
  std::string counts(endpoints_.size(), '\0');
  auto stopped = [&stop] { return stop.load(); };
  if (!RecvExactly(fd.get(), got.data(), got.size(), deadline_, stopped).ok() || !ConstantTimeEquals(got, token_) ||
      !RecvExactly(fd.get(), counts.data(), counts.size(), deadline_, stopped).ok() ||
      std::any_of(counts.begin(), counts.end(), [&](char c) { return static_cast<uint8_t>(c) > streams_; }) ||
      ep->slots.fetch_add(1) >= streams_) {
    ep->refused.fetch_add(1);
    return;
  }
  for (size_t i = 0; i < endpoints_.size(); ++i) endpoints_[i]->expected.store(static_cast<uint8_t>(counts[i]));
  std::vector<char> buf(kRecvChunk);
  uint64_t bytes = 0;
  int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
  while (WaitFor(fd.get(), POLLIN, deadline_, stopped)) {
    const ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
    if (n > 0) {
      const int64_t now = NowNs();
      if (bytes == 0) first = now;
      last = now;
      bytes += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    ep->finished.fetch_add(1);  // the sender closed (0) or reset the stream: it is over either way
    break;
  }
  ep->bytes.fetch_add(bytes);
  if (bytes > 0) {
    int64_t f = ep->first_ns.load();
    while (first < f && !ep->first_ns.compare_exchange_weak(f, first)) {
    }
    int64_t l = ep->last_ns.load();
    while (last > l && !ep->last_ns.compare_exchange_weak(l, last)) {
    }
  }
}

v1::LinkReceiveSummary LinkReceiver::Run(const std::function<bool()>& cancelled) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> acceptors;
  std::vector<std::thread> rdma_halves;  // wait for their sender's control stream meanwhile
  for (auto& ep_ptr : endpoints_) {
    Endpoint* ep = ep_ptr.get();
    if (ep->rdma) {
      rdma_halves.emplace_back(
          [this, ep, &cancelled] { ep->rdma_result = ep->rdma->Run(token_, deadline_, cancelled); });
    }
    if (ep->listener.get() < 0) continue;
    acceptors.emplace_back([this, ep, &stop] {
      while (WaitFor(ep->listener.get(), POLLIN, deadline_, [&stop] { return stop.load(); })) {
        const int fd = ::accept4(ep->listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) continue;
        ep->readers.emplace_back([this, ep, fd, &stop] { ReadConnection(ep, fd, stop); });
      }
      ep->listener.reset();  // nothing listens once the test is over
      for (std::thread& t : ep->readers) t.join();
    });
  }
  for (;;) {
    // Until a stream's header says how many connected, every endpoint waits for all `streams`.
    const bool all_done = std::all_of(endpoints_.begin(), endpoints_.end(), [&](const auto& ep) {
      const int expected = ep->expected.load();
      const uint32_t want = expected >= 0 ? static_cast<uint32_t>(expected) : streams_;
      return ep->slots.load() >= want && ep->finished.load() >= want;
    });
    if (all_done || Clock::now() >= deadline_ || cancelled()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop.store(true);
  for (std::thread& t : acceptors) t.join();
  for (std::thread& t : rdma_halves) t.join();

  v1::LinkReceiveSummary summary;
  for (const auto& ep : endpoints_) {
    v1::LinkReceiveResult* r = summary.add_results();
    r->set_interface(ep->interface);
    r->set_payload_bytes(ep->bytes.load());
    if (ep->bytes.load() > 0) r->set_seconds(static_cast<double>(ep->last_ns.load() - ep->first_ns.load()) / 1e9);
    const uint32_t accepted = std::min(ep->slots.load(), streams_);
    r->set_connections(accepted);
    r->set_refused(ep->refused.load());
    *r->mutable_counters() = Delta(ep->before, ReadInterfaceCounters(roots_, ep->interface));
    if (transport_ != LinkTransport::kTcp) {
      *r->mutable_rdma() = ep->rdma_result;
      if (!ep->rdma) r->mutable_rdma()->set_error(ep->rdma_info.error());
    }
    if (transport_ == LinkTransport::kRdma) {
      // The RDMA writes are the half's payload; the receiver knows them from the sender's report.
      r->set_payload_bytes(ep->rdma_result.bytes());
      r->set_seconds(ep->rdma_result.seconds());
      r->set_error(ep->rdma_result.error());
      r->set_connections(ep->rdma_result.error().empty() ? 1 : 0);  // the control stream stands for the streams
      continue;
    }
    if (accepted == 0) {
      r->set_error("no connection with the test's token arrived");
    } else if (ep->finished.load() < accepted) {
      r->set_error(absl::StrCat(accepted - ep->finished.load(), " of ", accepted,
                                " streams were still open when the receiver stopped"));
    }
  }
  return summary;
}

// ---------------------------------------------------------------------------------------------
// Sender

namespace {

struct Stream {
  int target = 0;
  Fd fd;
  std::string error;
  uint64_t bytes = 0;
  double seconds = 0;
  uint64_t retransmits = 0;
  uint64_t segments_out = 0;
};

absl::Status SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(Errno("send"));
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

void SetSendTimeout(int fd, std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// A blocking socket bound to the target's interface and local address, connected within
// kConnectTimeout, that has sent the token.
absl::StatusOr<Fd> ConnectStream(const v1::LinkTarget& t, const std::string& token, const std::atomic<bool>& stop) {
  ASSIGN_OR_RETURN(sockaddr_in remote, Ipv4Sockaddr(t.remote_ipv4(), t.port()));
  ASSIGN_OR_RETURN(Fd fd, BoundSocket(t.interface(), t.local_ipv4()));
  if (absl::Status c = ConnectWithin(fd.get(), remote, kConnectTimeout, [&stop] { return stop.load(); }); !c.ok()) {
    return absl::Status(c.code(), absl::StrCat("connect to ", t.remote_ipv4(), ":", t.port(), ": ", c.message()));
  }
  const int flags = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  SetSendTimeout(fd.get(), std::chrono::duration_cast<std::chrono::milliseconds>(kSendStall));
  RETURN_IF_ERROR(SendAll(fd.get(), token.data(), token.size()));
  return fd;
}

// Sends the header (streams connected per target), then payload until `end`; then closes its
// half, waits for the receiver to close (all bytes taken), and reads TCP_INFO.
void SendStream(Stream* s, const std::string& header, const char* chunk, Clock::time_point start,
                Clock::time_point end, const std::atomic<bool>& stop) {
  const int fd = s->fd.get();
  if (absl::Status st = SendAll(fd, header.data(), header.size()); !st.ok()) {
    s->error = std::string(st.message());
    s->fd.reset();
    return;
  }
  // Short send timeouts so that the duration is kept to within a slice; a stream that moves
  // nothing for kSendStall has failed.
  SetSendTimeout(fd, std::chrono::milliseconds(200));
  Clock::time_point progress = Clock::now();
  while (!stop.load() && Clock::now() < end) {
    const ssize_t n = ::send(fd, chunk, kSendChunk, MSG_NOSIGNAL);
    if (n > 0) {
      s->bytes += static_cast<uint64_t>(n);
      progress = Clock::now();
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (Clock::now() - progress > kSendStall) {
        s->error = "nothing could be sent for 2 s";
        break;
      }
      continue;
    }
    s->error = Errno("send");
    break;
  }
  ::shutdown(fd, SHUT_WR);
  bool drained = false;
  char sink[4096];
  const Clock::time_point drain_end = Clock::now() + kDrainTimeout;
  while (s->error.empty() && WaitFor(fd, POLLIN, drain_end, [&stop] { return stop.load(); })) {
    const ssize_t n = ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      drained = n == 0;
      break;
    }
  }
  s->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (s->error.empty() && !drained) s->error = "the receiver did not take the last bytes within 5 s";
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0) {
    s->retransmits = info.tcpi_total_retrans;
    s->segments_out = info.tcpi_segs_out;
  }
  s->fd.reset();
}

// Runs fn(i) for i in [0, n) on n threads; while they run, polls `cancelled` and raises `stop`.
void RunAll(size_t n, const std::function<void(size_t)>& fn, const std::function<bool()>& cancelled,
            std::atomic<bool>* stop) {
  std::atomic<size_t> running{n};
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      fn(i);
      running.fetch_sub(1);
    });
  }
  while (running.load() > 0) {
    if (!stop->load() && cancelled()) stop->store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace

absl::StatusOr<v1::LinkSendResponse> RunLinkSend(const FactsRoots& roots, const v1::LinkSendRequest& request,
                                                 const std::vector<LocalIpv4>& local,
                                                 const std::function<bool()>& cancelled) {
  RETURN_IF_ERROR(CheckLimits(request.token(), request.streams(), request.duration_ms(), request.targets_size(),
                              "targets"));
  ASSIGN_OR_RETURN(LinkTransport transport, ParseLinkTransport(request.transport()));
  const bool tcp = transport != LinkTransport::kRdma;
  for (const v1::LinkTarget& t : request.targets()) {
    ASSIGN_OR_RETURN(LocalIpv4 l, FindLocal(local, t.interface(), t.local_ipv4()));
    if (!SameIpv4Subnet(l, t.remote_ipv4())) {
      return absl::InvalidArgumentError(absl::StrCat("target ", t.remote_ipv4(), " is not in the subnet of ", l.interface,
                                                     " (", l.address, "/", l.prefix, "): the agent sends nowhere else"));
    }
    if (tcp && (t.port() < 1 || t.port() > 65535)) return absl::InvalidArgumentError(absl::StrCat("bad port ", t.port()));
    if (t.rdma().control_port() > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad rdma control port ", t.rdma().control_port()));
    }
  }
  std::vector<absl::StatusOr<InterfaceCounters>> before;
  for (const v1::LinkTarget& t : request.targets()) before.push_back(ReadInterfaceCounters(roots, t.interface()));

  std::vector<Stream> streams;
  for (int t = 0; t < request.targets_size() && tcp; ++t) {
    for (uint32_t i = 0; i < request.streams(); ++i) streams.emplace_back().target = t;
  }
  std::atomic<bool> stop{false};
  // Every stream connects before any sends, so that all halves send over the same seconds.
  RunAll(
      streams.size(),
      [&](size_t i) {
        absl::StatusOr<Fd> fd = ConnectStream(request.targets(streams[i].target), request.token(), stop);
        if (fd.ok()) {
          streams[i].fd = std::move(*fd);
        } else {
          streams[i].error = std::string(fd.status().message());
        }
      },
      cancelled, &stop);
  // The receiver stops waiting for the streams that did not connect once it knows how many did.
  std::string header(request.targets_size(), '\0');
  for (const Stream& st : streams) {
    if (st.fd.get() >= 0) ++header[st.target];
  }
  const std::vector<char> chunk(kSendChunk, '\x5a');
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::milliseconds(request.duration_ms());
  RunAll(
      streams.size(),
      [&](size_t i) {
        if (streams[i].fd.get() >= 0) SendStream(&streams[i], header, chunk.data(), start, end, stop);
      },
      cancelled, &stop);

  // RDMA after TCP, so that the two do not share the wire; every half at once again.
  std::vector<v1::LinkRdmaResult> rdma(request.targets_size());
  if (transport != LinkTransport::kTcp) {
    RdmaWriteOptions options;
    options.duration = std::chrono::milliseconds(request.duration_ms());
    RunAll(
        rdma.size(),
        [&](size_t i) {
          const v1::LinkTarget& t = request.targets(static_cast<int>(i));
          if (t.rdma().control_port() == 0) {
            rdma[i].set_error(t.rdma().error().empty() ? "the receiver offered no RDMA queue pair" : t.rdma().error());
          } else if (!stop.load()) {
            rdma[i] = RunRdmaSendHalf(roots, t, request.token(), options, [&] { return stop.load(); });
          }
        },
        cancelled, &stop);
  }
  v1::LinkSendResponse response;
  for (int t = 0; t < request.targets_size(); ++t) {
    v1::LinkSendResult* r = response.add_results();
    if (transport != LinkTransport::kTcp) *r->mutable_rdma() = rdma[t];
    if (!tcp) {
      // The RDMA writes are the half's payload.
      r->set_bytes_sent(rdma[t].bytes());
      r->set_seconds(rdma[t].seconds());
      r->set_streams_ok(rdma[t].error().empty() ? 1 : 0);
      r->set_error(rdma[t].error());
    }
    r->set_interface(request.targets(t).interface());
    for (const Stream& s : streams) {
      if (s.target != t) continue;
      r->set_bytes_sent(r->bytes_sent() + s.bytes);
      r->set_seconds(std::max(r->seconds(), s.seconds));
      r->set_tcp_retransmits(r->tcp_retransmits() + s.retransmits);
      r->set_tcp_segments_out(r->tcp_segments_out() + s.segments_out);
      if (s.error.empty()) {
        r->set_streams_ok(r->streams_ok() + 1);
      } else if (r->error().empty()) {
        r->set_error(s.error);
      }
    }
    *r->mutable_counters() = Delta(before[t], ReadInterfaceCounters(roots, request.targets(t).interface()));
  }
  if (stop.load()) return absl::CancelledError("the link test was cancelled");
  return response;
}

}  // namespace tandem::agentd
