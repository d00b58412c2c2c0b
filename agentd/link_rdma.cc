#include "agentd/link_rdma.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agentd/auth.h"
#include "agentd/link_counters.h"
#include "agentd/link_rdma_verbs.h"
#include "common/status.h"

#ifdef TANDEM_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace tandem::agentd {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

absl::StatusOr<std::vector<std::string>> ListRdmaDevices() {
#ifdef TANDEM_HAVE_IBVERBS
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  // No list at all is what a host without the RDMA core modules answers (ENOSYS): no devices.
  if (list == nullptr) return std::vector<std::string>{};
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return names;
#else
  return absl::UnimplementedError("built without libibverbs");
#endif
}

std::string DescribeRdma(const absl::StatusOr<std::vector<std::string>>& devices) {
  if (!devices.ok()) return absl::StrCat("rdma: not tested (", devices.status().message(), ")");
  if (devices->empty()) return "rdma: no devices";
  return absl::StrCat("rdma: devices ", absl::StrJoin(*devices, ", "));
}

// ---------------------------------------------------------------------------------------------
// sysfs

namespace {

// Entry names of `dir`, numbers by value (gids/2 before gids/10); empty when it cannot be read.
std::vector<std::string> SortedEntries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    uint64_t x = 0, y = 0;
    if (absl::SimpleAtoi(a, &x) && absl::SimpleAtoi(b, &y)) return x < y;
    return a < b;
  });
  return names;
}

}  // namespace

absl::StatusOr<RdmaPortChoice> FindRoceV2Port(const FactsRoots& roots, const std::string& interface,
                                              const std::string& ipv4) {
  const fs::path ib = fs::path(roots.sysfs_root) / "class" / "infiniband";
  std::vector<std::string> seen;  // this interface's GID entries that did not fit
  for (const std::string& device : SortedEntries(ib)) {
    for (const std::string& port : SortedEntries(ib / device / "ports")) {
      const fs::path pdir = ib / device / "ports" / port;
      for (const std::string& idx : SortedEntries(pdir / "gid_attrs" / "ndevs")) {
        // Unused table slots fail to read (EINVAL on a real kernel) or are zero: not ours.
        absl::StatusOr<std::string> ndev = ReadTrimmedFile((pdir / "gid_attrs" / "ndevs" / idx).string());
        if (!ndev.ok() || *ndev != interface) continue;
        absl::StatusOr<std::string> gid = ReadTrimmedFile((pdir / "gids" / idx).string());
        if (!gid.ok() || IsZeroGid(*gid)) continue;
        absl::StatusOr<std::string> type = ReadTrimmedFile((pdir / "gid_attrs" / "types" / idx).string());
        const std::string type_text = type.ok() ? *type : "type unknown";
        const std::string address = GidToIpv4(*gid);
        uint32_t port_num = 0, index = 0;
        if (type.ok() && *type == "RoCE v2" && address == ipv4 && absl::SimpleAtoi(port, &port_num) &&
            absl::SimpleAtoi(idx, &index)) {
          return RdmaPortChoice{device, port_num, index, *gid};
        }
        seen.push_back(absl::StrCat(device, " port ", port, " GID ", idx, " (", type_text, ", ",
                                    address.empty() ? *gid : address, ")"));
      }
    }
  }
  if (seen.empty()) {
    return absl::NotFoundError(absl::StrCat("no RDMA device has a GID on ", interface));
  }
  return absl::NotFoundError(absl::StrCat("no RoCE v2 GID of ", ipv4, " on ", interface, "; it has ",
                                          absl::StrJoin(seen, ", ")));
}

absl::StatusOr<std::map<std::string, uint64_t>> ReadRdmaPortCounters(const FactsRoots& roots, const std::string& device,
                                                                     uint32_t port) {
  const fs::path dir = fs::path(roots.sysfs_root) / "class" / "infiniband" / device / "ports" /
                       std::to_string(port) / "counters";
  std::map<std::string, uint64_t> out;
  for (const std::string& name : SortedEntries(dir)) {
    absl::StatusOr<std::string> text = ReadTrimmedFile((dir / name).string());
    uint64_t v = 0;
    if (!text.ok() || !absl::SimpleAtoi(*text, &v)) continue;  // some counters are write-only or absent
    constexpr std::string_view kData = "_data";
    if (name.size() > kData.size() && name.compare(name.size() - kData.size(), kData.size(), kData) == 0) {
      out[name.substr(0, name.size() - kData.size()) + "_bytes"] = v * 4;  // 4-byte words
    } else {
      out[name] = v;
    }
  }
  if (out.empty()) return absl::NotFoundError(absl::StrCat("no counters under ", dir.string()));
  return out;
}

absl::StatusOr<LinkTransport> ParseLinkTransport(std::string_view text) {
  if (text == "tcp") return LinkTransport::kTcp;
  if (text == "rdma") return LinkTransport::kRdma;
  if (text == "both" || text.empty()) return LinkTransport::kBoth;
  return absl::InvalidArgumentError(absl::StrCat("transport must be tcp, rdma or both, got \"", AsAbsl(text), "\""));
}

// ---------------------------------------------------------------------------------------------
// Frames

std::string EncodeRdmaFrame(const google::protobuf::MessageLite& message) {
  const std::string body = message.SerializeAsString();
  const uint32_t n = htonl(static_cast<uint32_t>(body.size()));
  return std::string(reinterpret_cast<const char*>(&n), 4) + body;
}

absl::Status DecodeRdmaFrame(std::string_view frame, google::protobuf::MessageLite* message) {
  if (frame.size() < 4) return absl::InvalidArgumentError("rdma frame: shorter than its length");
  uint32_t n = 0;
  std::memcpy(&n, frame.data(), 4);
  n = ntohl(n);
  if (n > kRdmaMaxFrame) return absl::InvalidArgumentError(absl::StrCat("rdma frame: ", n, " bytes is too long"));
  if (frame.size() != 4 + static_cast<size_t>(n)) {
    return absl::InvalidArgumentError(absl::StrCat("rdma frame: says ", n, " bytes, has ", frame.size() - 4));
  }
  if (!message->ParseFromArray(frame.data() + 4, static_cast<int>(n))) {
    return absl::InvalidArgumentError("rdma frame: not a " + message->GetTypeName());
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The write loop

v1::LinkRdmaResult RunRdmaWrites(RdmaWritePath& path, const RdmaWriteOptions& options,
                                 const std::function<bool()>& cancelled) {
  v1::LinkRdmaResult result;
  const uint64_t slots = std::max<uint64_t>(1, options.buffer_bytes / options.write_bytes);
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + options.duration;
  Clock::time_point progress = start, last_done = start;
  int outstanding = 0;
  uint64_t next_id = 0;
  std::vector<RdmaWritePath::Completion> done;
  while (result.error().empty()) {
    const Clock::time_point now = Clock::now();
    if (cancelled()) {
      result.set_error("cancelled");
      break;
    }
    while (now < end && outstanding < options.window) {
      // Writes cycle through the buffer's slots: the bytes are the same every time, the
      // receiver never reads them.
      absl::Status st = path.PostWrite(next_id, (next_id % slots) * options.write_bytes, options.write_bytes);
      if (!st.ok()) {
        result.set_error(std::string(st.message()));
        break;
      }
      ++next_id;
      ++outstanding;
    }
    if (!result.error().empty() || (outstanding == 0 && now >= end)) break;
    done.clear();
    if (absl::Status st = path.Poll(&done); !st.ok()) {
      result.set_error(std::string(st.message()));
      break;
    }
    for (const RdmaWritePath::Completion& c : done) {
      --outstanding;
      if (!c.error.empty()) {
        if (result.error().empty()) result.set_error(absl::StrCat("write ", c.wr_id, ": ", c.error));
        continue;
      }
      result.set_bytes(result.bytes() + options.write_bytes);
      result.set_writes(result.writes() + 1);
      progress = last_done = Clock::now();
    }
    if (done.empty()) {
      if (outstanding > 0 && Clock::now() - progress > options.stall) {
        result.set_error(absl::StrCat("no RDMA write completed for ", options.stall.count() / 1000.0, " s (",
                                      outstanding, " outstanding)"));
      }
      std::this_thread::yield();
    }
  }
  result.set_seconds(std::chrono::duration<double>(last_done - start).count());
  return result;
}

// ---------------------------------------------------------------------------------------------
// The control stream: plain blocking-with-deadline socket calls, one connection per half.

namespace {

constexpr auto kControlStep = std::chrono::seconds(5);  // a connect, or an answer expected now
using Cancelled = std::function<bool()>;

absl::Status WriteAll(int fd, std::string_view data, Clock::time_point deadline, const Cancelled& cancelled) {
  while (!data.empty()) {
    if (!WaitFor(fd, POLLOUT, deadline, cancelled)) return absl::DeadlineExceededError("rdma control: send timed out");
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return absl::UnavailableError(Errno("rdma control: send"));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadExact(int fd, size_t size, Clock::time_point deadline, const Cancelled& cancelled) {
  std::string out(size, '\0');
  if (absl::Status st = RecvExactly(fd, out.data(), size, deadline, cancelled); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("rdma control: ", st.message()));
  }
  return out;
}

absl::Status ReadFrame(int fd, google::protobuf::MessageLite* message, Clock::time_point deadline,
                       const Cancelled& cancelled) {
  ASSIGN_OR_RETURN(std::string head, ReadExact(fd, 4, deadline, cancelled));
  uint32_t n = 0;
  std::memcpy(&n, head.data(), 4);
  n = ntohl(n);
  if (n > kRdmaMaxFrame) return absl::InvalidArgumentError(absl::StrCat("rdma frame: ", n, " bytes is too long"));
  ASSIGN_OR_RETURN(std::string body, ReadExact(fd, n, deadline, cancelled));
  return DecodeRdmaFrame(head + body, message);
}

void SetCounterDelta(const absl::StatusOr<std::map<std::string, uint64_t>>& before,
                     const absl::StatusOr<std::map<std::string, uint64_t>>& after, v1::LinkRdmaResult* r) {
  if (!before.ok() || !after.ok()) return;  // a port without counters: the payload figure stands alone
  for (const auto& [k, v] : CounterDelta(*before, *after)) (*r->mutable_port_counters())[k] = v;
}

void Describe(const RdmaPortChoice& port, v1::LinkRdmaResult* r) {
  r->set_device(port.device);
  r->set_port(port.port);
  r->set_gid_index(port.gid_index);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Receiver

RdmaReceiveHalf::~RdmaReceiveHalf() = default;

absl::StatusOr<std::unique_ptr<RdmaReceiveHalf>> RdmaReceiveHalf::Open(LinkTransport transport,
                                                                       const FactsRoots& roots,
                                                                       const std::string& interface,
                                                                       const std::string& ipv4,
                                                                       v1::LinkRdmaQp* info) {
  *info = v1::LinkRdmaQp();
  if (transport == LinkTransport::kTcp) {
    info->set_error("tcp only was asked for");
    return nullptr;
  }
  std::unique_ptr<RdmaReceiveHalf> half(new RdmaReceiveHalf());
  half->roots_ = roots;
  absl::Status st = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(half->port_, FindRoceV2Port(roots, interface, ipv4));
    ASSIGN_OR_RETURN(half->qp_, RdmaQueuePair::Open(half->port_, RdmaWriteOptions().buffer_bytes,
                                                   RdmaWriteOptions().window));
    ASSIGN_OR_RETURN(Fd s, BoundSocket(interface, ipv4));
    if (::listen(s.get(), 4) != 0) return absl::UnavailableError(Errno(absl::StrCat("listen on ", ipv4)));
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    *info = half->qp_->Info();
    info->set_control_port(ntohs(sa.sin_port));
    half->listener_ = std::move(s);
    return absl::OkStatus();
  }();
  if (st.ok()) return half;
  const std::string why = absl::StrCat("rdma on ", interface, ": ", st.message());
  if (transport == LinkTransport::kRdma) return absl::FailedPreconditionError(why);
  *info = v1::LinkRdmaQp();
  info->set_error(absl::StrCat(why, "; TCP only"));
  return nullptr;
}

v1::LinkRdmaResult ServeRdmaControl(int listener, const std::string& token, Clock::time_point deadline,
                                    const Cancelled& cancelled,
                                    const std::function<absl::Status(const v1::LinkRdmaQp&)>& ready_to_receive) {
  v1::LinkRdmaResult result;
  absl::Status st = [&]() -> absl::Status {
    // Connections without the token are closed and the wait goes on: the port is on the half's
    // address only, but anyone on that subnet can reach it.
    for (;;) {
      if (!WaitFor(listener, POLLIN, deadline, cancelled)) {
        return absl::DeadlineExceededError("the sender never opened the rdma control stream");
      }
      Fd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (conn.get() < 0) continue;
      const Clock::time_point step = std::min(deadline, Clock::now() + kControlStep);
      absl::StatusOr<std::string> got = ReadExact(conn.get(), token.size(), step, cancelled);
      if (!got.ok() || !ConstantTimeEquals(*got, token)) continue;
      v1::LinkRdmaQp sender;
      RETURN_IF_ERROR(ReadFrame(conn.get(), &sender, step, cancelled));
      if (!sender.error().empty()) return absl::UnavailableError(absl::StrCat("the sender: ", sender.error()));
      v1::LinkRdmaResult ready;
      if (absl::Status rtr = ready_to_receive(sender); !rtr.ok()) ready.set_error(std::string(rtr.message()));
      RETURN_IF_ERROR(WriteAll(conn.get(), EncodeRdmaFrame(ready), step, cancelled));
      if (!ready.error().empty()) return absl::UnavailableError(ready.error());
      // The sender writes for the duration, then reports.
      v1::LinkRdmaResult report;
      RETURN_IF_ERROR(ReadFrame(conn.get(), &report, deadline, cancelled));
      result.set_bytes(report.bytes());
      result.set_writes(report.writes());
      result.set_seconds(report.seconds());
      result.set_error(report.error());
      return absl::OkStatus();
    }
  }();
  if (!st.ok()) result.set_error(std::string(st.message()));
  return result;
}

v1::LinkRdmaResult RdmaReceiveHalf::Run(const std::string& token, Clock::time_point deadline,
                                        const Cancelled& cancelled) {
  const auto before = ReadRdmaPortCounters(roots_, port_.device, port_.port);
  v1::LinkRdmaResult result = ServeRdmaControl(listener_.get(), token, deadline, cancelled,
                                               [this](const v1::LinkRdmaQp& s) { return qp_->ReadyToReceive(s); });
  Describe(port_, &result);
  SetCounterDelta(before, ReadRdmaPortCounters(roots_, port_.device, port_.port), &result);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Sender

v1::LinkRdmaResult RunRdmaSendHalf(const FactsRoots& roots, const v1::LinkTarget& target, const std::string& token,
                                   const RdmaWriteOptions& options, const Cancelled& cancelled) {
  v1::LinkRdmaResult result;
  absl::StatusOr<RdmaPortChoice> port = absl::UnknownError("not looked up");
  absl::StatusOr<std::map<std::string, uint64_t>> before = absl::UnknownError("not read");
  absl::Status st = [&]() -> absl::Status {
    // The control stream comes first: when this end cannot run RDMA, the receiver hears why at
    // once instead of waiting out its deadline for a stream that never comes.
    ASSIGN_OR_RETURN(Fd s, BoundSocket(target.interface(), target.local_ipv4()));
    ASSIGN_OR_RETURN(sockaddr_in to, Ipv4Sockaddr(target.remote_ipv4(), target.rdma().control_port()));
    Clock::time_point step = Clock::now() + kControlStep;
    if (absl::Status c = ConnectWithin(s.get(), to, kControlStep, cancelled); !c.ok()) {
      return absl::Status(c.code(), absl::StrCat("rdma control: connect to ", target.remote_ipv4(), ":",
                                                 target.rdma().control_port(), ": ", c.message()));
    }

    absl::StatusOr<std::unique_ptr<RdmaQueuePair>> qp = absl::UnknownError("not opened");
    port = FindRoceV2Port(roots, target.interface(), target.local_ipv4());
    if (port.ok()) {
      Describe(*port, &result);
      qp = RdmaQueuePair::Open(*port, options.buffer_bytes, options.window);
    }
    const absl::Status opened = port.ok() ? qp.status() : port.status();
    v1::LinkRdmaQp mine;
    if (opened.ok()) {
      mine = (*qp)->Info();
    } else {
      mine.set_error(std::string(opened.message()));
    }
    RETURN_IF_ERROR(WriteAll(s.get(), token + EncodeRdmaFrame(mine), step, cancelled));
    RETURN_IF_ERROR(opened);
    v1::LinkRdmaResult ready;
    RETURN_IF_ERROR(ReadFrame(s.get(), &ready, step, cancelled));
    if (!ready.error().empty()) return absl::UnavailableError(absl::StrCat("the receiver: ", ready.error()));
    RETURN_IF_ERROR((*qp)->ReadyToReceive(target.rdma()));
    RETURN_IF_ERROR((*qp)->ReadyToSend());
    RdmaWriteOptions o = options;
    o.buffer_bytes = std::min<uint64_t>(options.buffer_bytes, target.rdma().len());
    if (o.buffer_bytes < o.write_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the receiver's buffer (", o.buffer_bytes, " bytes) is smaller than a write"));
    }
    before = ReadRdmaPortCounters(roots, port->device, port->port);
    v1::LinkRdmaResult writes = RunRdmaWrites(**qp, o, cancelled);
    result.set_bytes(writes.bytes());
    result.set_writes(writes.writes());
    result.set_seconds(writes.seconds());
    result.set_error(writes.error());
    step = Clock::now() + kControlStep;
    return WriteAll(s.get(), EncodeRdmaFrame(result), step, cancelled);
  }();
  if (!st.ok() && result.error().empty()) result.set_error(std::string(st.message()));
  if (port.ok()) SetCounterDelta(before, ReadRdmaPortCounters(roots, port->device, port->port), &result);
  return result;
}

}  // namespace tandem::agentd
