// linktest's RDMA side without an RDMA device: the netdev -> (device, port, GID index) choice on
// a fake sysfs tree, the port counters' word-to-byte conversion, the control stream's frames and
// both ends of its exchange (the verbs calls aside), the transport choice (rdma fails clearly,
// both falls back to TCP saying why) and the write loop's window, deadline and counting against
// a fake verbs path.
#include "agentd/link_rdma.h"

#include <future>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "agentd/link_transfer.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

// One GID table entry of DEV port PORT.
void Gid(const fs::path& root, const std::string& dev, int port, int idx, const std::string& gid,
         const std::string& type, const std::string& ndev) {
  const fs::path p = root / "class/infiniband" / dev / "ports" / std::to_string(port);
  Write(p / "gids" / std::to_string(idx), gid);
  Write(p / "gid_attrs/types" / std::to_string(idx), type);
  Write(p / "gid_attrs/ndevs" / std::to_string(idx), ndev);
}

class RdmaSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("rdma_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "class");
    roots_.sysfs_root = root_.string();
  }
  void TearDown() override { fs::remove_all(root_); }

  // A CX-7-like table where the right entry is neither index 0 nor the first RoCE v2 one.
  void Cx7Table() {
    const std::string v4 = "0000:0000:0000:0000:0000:ffff:0a00:0001";     // 10.0.0.1
    const std::string other = "0000:0000:0000:0000:0000:ffff:0a00:0909";  // 10.0.9.9
    Gid(root_, "mlx5_0", 1, 0, "fe80:0000:0000:0000:0a00:27ff:fe00:0001", "IB/RoCE v1", "enp1s0f0np0");
    Gid(root_, "mlx5_0", 1, 1, "fe80:0000:0000:0000:0a00:27ff:fe00:0001", "RoCE v2", "enp1s0f0np0");
    Gid(root_, "mlx5_0", 1, 2, v4, "IB/RoCE v1", "enp1s0f0np0");
    Gid(root_, "mlx5_0", 1, 3, other, "RoCE v2", "enp1s0f0np0");
    Gid(root_, "mlx5_0", 1, 4, "0000:0000:0000:0000:0000:0000:0000:0000", "RoCE v2", "enp1s0f0np0");
    Gid(root_, "mlx5_0", 1, 10, v4, "RoCE v2", "enp1s0f0np0");
    // The other half's device holds the same address on another netdev: not this interface's.
    Gid(root_, "mlx5_1", 1, 3, v4, "RoCE v2", "enP2p1s0f1np1");
  }

  fs::path root_;
  FactsRoots roots_;
};

TEST_F(RdmaSysfs, ChoosesTheRoceV2GidOfTheInterfacesAddress) {
  Cx7Table();
  absl::StatusOr<RdmaPortChoice> c = FindRoceV2Port(roots_, "enp1s0f0np0", "10.0.0.1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->device, "mlx5_0");
  EXPECT_EQ(c->port, 1u);
  EXPECT_EQ(c->gid_index, 10u);
  EXPECT_EQ(c->gid, "0000:0000:0000:0000:0000:ffff:0a00:0001");

  absl::StatusOr<RdmaPortChoice> other = FindRoceV2Port(roots_, "enP2p1s0f1np1", "10.0.0.1");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->device, "mlx5_1");
  EXPECT_EQ(other->gid_index, 3u);
}

TEST_F(RdmaSysfs, SaysWhatItSawWhenNoEntryFits) {
  Cx7Table();
  absl::StatusOr<RdmaPortChoice> c = FindRoceV2Port(roots_, "enp1s0f0np0", "10.0.0.7");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("no RoCE v2 GID of 10.0.0.7 on enp1s0f0np0"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("mlx5_0 port 1 GID 2 (IB/RoCE v1, 10.0.0.1)"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("GID 3 (RoCE v2, 10.0.9.9)"));
  // The zero entry is an unused slot, not a candidate.
  EXPECT_THAT(std::string(c.status().message()), ::testing::Not(HasSubstr("GID 4")));

  absl::StatusOr<RdmaPortChoice> none = FindRoceV2Port(roots_, "eth9", "10.0.0.1");
  ASSERT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), "no RDMA device has a GID on eth9");
}

TEST_F(RdmaSysfs, PortDataCountersAreWordsAndComeBackAsBytes) {
  const fs::path c = root_ / "class/infiniband/mlx5_0/ports/1/counters";
  Write(c / "port_xmit_data", "1000");
  Write(c / "port_rcv_data", "250");
  Write(c / "port_xmit_discards", "3");
  absl::StatusOr<std::map<std::string, uint64_t>> m = ReadRdmaPortCounters(roots_, "mlx5_0", 1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->at("port_xmit_bytes"), 4000u);
  EXPECT_EQ(m->at("port_rcv_bytes"), 1000u);
  EXPECT_EQ(m->at("port_xmit_discards"), 3u);
  EXPECT_EQ(m->count("port_xmit_data"), 0u);
  EXPECT_EQ(ReadRdmaPortCounters(roots_, "mlx5_0", 2).status().code(), absl::StatusCode::kNotFound);
}

TEST(RdmaFrame, QueuePairInfoRoundTrips) {
  v1::LinkRdmaQp qp;
  qp.set_qp_num(0x1234);
  qp.set_psn(0xabcdef);
  qp.set_gid(std::string("\0\0\0\0\0\0\0\0\0\0\xff\xff\x0a\x00\x00\x01", 16));
  qp.set_gid_index(10);
  qp.set_rkey(0xdeadbeef);
  qp.set_addr(0x7f0000001000);
  qp.set_len(8 << 20);
  qp.set_mtu(4096);
  qp.set_device("mlx5_0");
  qp.set_port(1);
  qp.set_control_port(41234);
  const std::string frame = EncodeRdmaFrame(qp);
  v1::LinkRdmaQp back;
  ASSERT_TRUE(DecodeRdmaFrame(frame, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), qp.SerializeAsString());
  EXPECT_EQ(back.gid().size(), 16u);

  EXPECT_FALSE(DecodeRdmaFrame(frame.substr(0, frame.size() - 1), &back).ok());
  EXPECT_FALSE(DecodeRdmaFrame(frame.substr(0, 3), &back).ok());
  std::string huge = frame;
  huge[0] = '\x7f';
  EXPECT_THAT(std::string(DecodeRdmaFrame(huge, &back).message()), HasSubstr("too long"));
  EXPECT_FALSE(DecodeRdmaFrame(std::string("\0\0\0\2\xff\xff", 6), &back).ok());
}

TEST(RdmaTransport, Parses) {
  EXPECT_EQ(*ParseLinkTransport("tcp"), LinkTransport::kTcp);
  EXPECT_EQ(*ParseLinkTransport("rdma"), LinkTransport::kRdma);
  EXPECT_EQ(*ParseLinkTransport("both"), LinkTransport::kBoth);
  EXPECT_EQ(*ParseLinkTransport(""), LinkTransport::kBoth);
  EXPECT_EQ(ParseLinkTransport("roce").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RdmaSysfs, RdmaWithoutDevicesFailsClearlyAndBothFallsBackToTcp) {
  v1::LinkRdmaQp info;
  auto rdma = RdmaReceiveHalf::Open(LinkTransport::kRdma, roots_, "lo", "127.0.0.1", &info);
  ASSERT_EQ(rdma.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rdma.status().message(), "rdma on lo: no RDMA device has a GID on lo");

  auto both = RdmaReceiveHalf::Open(LinkTransport::kBoth, roots_, "lo", "127.0.0.1", &info);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(*both, nullptr);
  EXPECT_EQ(info.error(), "rdma on lo: no RDMA device has a GID on lo; TCP only");
  EXPECT_EQ(info.qp_num(), 0u);

  auto tcp = RdmaReceiveHalf::Open(LinkTransport::kTcp, roots_, "lo", "127.0.0.1", &info);
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(*tcp, nullptr);
  EXPECT_THAT(info.error(), HasSubstr("tcp only"));
}

TEST_F(RdmaSysfs, AGidInSysfsWithoutAVerbsDeviceStillFallsBack) {
  // sysfs names a port but libibverbs cannot open it (this test machine has no RDMA device, or
  // the build has no libibverbs): the verbs side's reason reaches the operator.
  Gid(root_, "mlx5_0", 1, 3, "0000:0000:0000:0000:0000:ffff:7f00:0001", "RoCE v2", "lo");
  v1::LinkRdmaQp info;
  auto rdma = RdmaReceiveHalf::Open(LinkTransport::kRdma, roots_, "lo", "127.0.0.1", &info);
  ASSERT_EQ(rdma.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(rdma.status().message()), HasSubstr("rdma on lo: "));
  EXPECT_THAT(std::string(rdma.status().message()),
              ::testing::AnyOf(HasSubstr("not built in"), HasSubstr("ibv_get_device_list"),
                               HasSubstr("libibverbs does not list mlx5_0")));
  auto both = RdmaReceiveHalf::Open(LinkTransport::kBoth, roots_, "lo", "127.0.0.1", &info);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(*both, nullptr);
  EXPECT_THAT(info.error(), HasSubstr("; TCP only"));
}

// A TCP listener on 127.0.0.1 (its port in *port), and a blocking client with 5 s timeouts.
int ListenOnLoopback(uint32_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  EXPECT_EQ(::listen(fd, 4), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  *port = ntohs(sa.sin_port);
  return fd;
}

int ConnectLoopback(uint32_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  return fd;
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// One frame from a blocking socket (the test's side of the control stream).
v1::LinkRdmaResult ReceiveResultFrame(int fd) {
  std::string got;
  char buf[512];
  while (got.size() < 4 || got.size() < 4 + ntohl(*reinterpret_cast<const uint32_t*>(got.data()))) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  v1::LinkRdmaResult r;
  EXPECT_TRUE(DecodeRdmaFrame(got, &r).ok()) << got.size() << " bytes";
  return r;
}

const std::string kRdmaToken(kLinkTokenBytes, 'k');
auto InFiveSeconds() { return std::chrono::steady_clock::now() + std::chrono::seconds(5); }

TEST(RdmaControl, SkipsStrangersReadiesTheQueuePairAndReturnsTheSendersReport) {
  uint32_t port = 0;
  const int listener = ListenOnLoopback(&port);
  v1::LinkRdmaQp seen;
  auto served = std::async(std::launch::async, [&] {
    return ServeRdmaControl(listener, kRdmaToken, InFiveSeconds(), [] { return false; },
                            [&](const v1::LinkRdmaQp& q) {
                              seen = q;
                              return absl::OkStatus();
                            });
  });
  const int stranger = ConnectLoopback(port);
  Send(stranger, std::string(kLinkTokenBytes, 'x'));
  ::close(stranger);

  const int sender = ConnectLoopback(port);
  v1::LinkRdmaQp mine;
  mine.set_qp_num(77);
  mine.set_psn(0x123456);
  mine.set_gid(std::string(16, '\x01'));
  Send(sender, kRdmaToken + EncodeRdmaFrame(mine));
  EXPECT_EQ(ReceiveResultFrame(sender).error(), "") << "the receiver is ready";
  v1::LinkRdmaResult report;
  report.set_bytes(uint64_t{5} << 30);
  report.set_writes(5120);
  report.set_seconds(1.25);
  Send(sender, EncodeRdmaFrame(report));
  const v1::LinkRdmaResult r = served.get();
  ::close(sender);
  ::close(listener);
  EXPECT_EQ(seen.qp_num(), 77u);
  EXPECT_EQ(seen.psn(), 0x123456u);
  EXPECT_EQ(r.error(), "");
  EXPECT_EQ(r.bytes(), uint64_t{5} << 30);
  EXPECT_EQ(r.writes(), 5120u);
  EXPECT_DOUBLE_EQ(r.seconds(), 1.25);
}

TEST(RdmaControl, AQueuePairThatCannotBeReadiedIsToldToTheSender) {
  uint32_t port = 0;
  const int listener = ListenOnLoopback(&port);
  auto served = std::async(std::launch::async, [&] {
    return ServeRdmaControl(listener, kRdmaToken, InFiveSeconds(), [] { return false; },
                            [](const v1::LinkRdmaQp&) {
                              return absl::UnavailableError("ibv_modify_qp(RTR): Invalid argument (errno 22)");
                            });
  });
  const int sender = ConnectLoopback(port);
  Send(sender, kRdmaToken + EncodeRdmaFrame(v1::LinkRdmaQp()));
  EXPECT_EQ(ReceiveResultFrame(sender).error(), "ibv_modify_qp(RTR): Invalid argument (errno 22)");
  EXPECT_EQ(served.get().error(), "ibv_modify_qp(RTR): Invalid argument (errno 22)");
  ::close(sender);
  ::close(listener);
}

TEST(RdmaControl, NoSenderEndsAtTheDeadline) {
  uint32_t port = 0;
  const int listener = ListenOnLoopback(&port);
  const auto start = std::chrono::steady_clock::now();
  const v1::LinkRdmaResult r =
      ServeRdmaControl(listener, kRdmaToken, start + std::chrono::milliseconds(200), [] { return false; },
                       [](const v1::LinkRdmaQp&) { return absl::OkStatus(); });
  ::close(listener);
  EXPECT_EQ(r.error(), "the sender never opened the rdma control stream");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

// A sender that cannot run RDMA still opens the control stream and tells the receiver why, so
// the receiver does not wait out its deadline.
TEST_F(RdmaSysfs, ASenderWithoutAPortTellsTheReceiverWhy) {
  uint32_t port = 0;
  const int listener = ListenOnLoopback(&port);
  bool readied = false;
  auto served = std::async(std::launch::async, [&] {
    return ServeRdmaControl(listener, kRdmaToken, InFiveSeconds(), [] { return false; },
                            [&](const v1::LinkRdmaQp&) {
                              readied = true;
                              return absl::OkStatus();
                            });
  });
  v1::LinkTarget t;
  t.set_interface("lo");
  t.set_local_ipv4("127.0.0.1");
  t.set_remote_ipv4("127.0.0.1");
  t.mutable_rdma()->set_control_port(port);
  const auto start = std::chrono::steady_clock::now();
  const v1::LinkRdmaResult sent = RunRdmaSendHalf(roots_, t, kRdmaToken, RdmaWriteOptions(), [] { return false; });
  const v1::LinkRdmaResult got = served.get();
  ::close(listener);
  EXPECT_EQ(sent.error(), "no RDMA device has a GID on lo");
  EXPECT_EQ(sent.bytes(), 0u);
  EXPECT_EQ(got.error(), "the sender: no RDMA device has a GID on lo");
  EXPECT_FALSE(readied);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);

  // No receiver at all: the connect's failure is the reason.
  const v1::LinkRdmaResult refused = RunRdmaSendHalf(roots_, t, kRdmaToken, RdmaWriteOptions(), [] { return false; });
  EXPECT_THAT(refused.error(), HasSubstr("rdma control: connect to 127.0.0.1:"));
}

// Both ends of a transfer on lo under a transport, with this test's sysfs (no RDMA device).
bool HasLoopback() {
  for (const LocalIpv4& l : ListLocalIpv4()) {
    if (l.interface == "lo" && l.address == "127.0.0.1") return true;
  }
  return false;
}

v1::LinkReceiveRequest LoopbackReceive(const std::string& transport) {
  v1::LinkReceiveRequest r;
  v1::LinkEndpoint* e = r.add_endpoints();
  e->set_interface("lo");
  e->set_ipv4("127.0.0.1");
  r.set_token(std::string(kLinkTokenBytes, 'k'));
  r.set_streams(1);
  r.set_duration_ms(1000);
  r.set_transport(transport);
  return r;
}

TEST_F(RdmaSysfs, TransferWithRdmaWithoutDevicesIsRefusedBeforeAnythingListens) {
  if (!HasLoopback()) GTEST_SKIP() << "no 127.0.0.1 on lo here";
  auto receiver = LinkReceiver::Open(roots_, LoopbackReceive("rdma"), ListLocalIpv4());
  ASSERT_EQ(receiver.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(receiver.status().message(), "rdma on lo: no RDMA device has a GID on lo");
  EXPECT_EQ(LinkReceiver::Open(roots_, LoopbackReceive("udp"), ListLocalIpv4()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RdmaSysfs, TransferWithBothWithoutDevicesRunsTcpAndSaysWhy) {
  if (!HasLoopback()) GTEST_SKIP() << "no 127.0.0.1 on lo here";
  const std::vector<LocalIpv4> local = ListLocalIpv4();
  auto receiver = LinkReceiver::Open(roots_, LoopbackReceive(""), local);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  const v1::LinkListening listening = (*receiver)->Listening();
  ASSERT_EQ(listening.rdma_size(), 1);
  EXPECT_EQ(listening.rdma(0).control_port(), 0u);
  EXPECT_EQ(listening.rdma(0).error(), "rdma on lo: no RDMA device has a GID on lo; TCP only");

  v1::LinkSendRequest send;
  v1::LinkTarget* t = send.add_targets();
  t->set_interface("lo");
  t->set_local_ipv4("127.0.0.1");
  t->set_remote_ipv4("127.0.0.1");
  t->set_port(listening.ports(0));
  *t->mutable_rdma() = listening.rdma(0);
  send.set_token(std::string(kLinkTokenBytes, 'k'));
  send.set_streams(1);
  send.set_duration_ms(1000);
  std::atomic<bool> sender_done{false};
  auto summary = std::async(std::launch::async, [&] { return (*receiver)->Run([&] { return sender_done.load(); }); });
  absl::StatusOr<v1::LinkSendResponse> sent = RunLinkSend(roots_, send, local, [] { return false; });
  sender_done.store(true);
  const v1::LinkReceiveSummary got = summary.get();
  ASSERT_TRUE(sent.ok()) << sent.status();
  const v1::LinkSendResult& s = sent->results(0);
  EXPECT_EQ(s.streams_ok(), 1u) << s.error();
  EXPECT_GT(s.bytes_sent(), 0u);
  EXPECT_EQ(s.rdma().error(), "rdma on lo: no RDMA device has a GID on lo; TCP only");
  EXPECT_EQ(s.rdma().bytes(), 0u);
  ASSERT_EQ(got.results_size(), 1);
  EXPECT_EQ(got.results(0).payload_bytes(), s.bytes_sent());
  EXPECT_EQ(got.results(0).rdma().error(), s.rdma().error());
}

// A verbs path that completes writes on the next poll, optionally failing one, never
// completing, or refusing a post. It checks the loop's invariants as it goes.
class FakePath : public RdmaWritePath {
 public:
  explicit FakePath(const RdmaWriteOptions& o) : buffer_bytes(o.buffer_bytes), window(o.window) {}
  uint64_t buffer_bytes = 0;
  int window = 0;
  int64_t fail_completion = -1;
  int64_t refuse_post = -1;
  bool never_complete = false;

  int64_t posted = 0, completed = 0, max_outstanding = 0;
  std::vector<std::string> violations;

  absl::Status PostWrite(uint64_t wr_id, uint64_t offset, uint32_t bytes) override {
    if (static_cast<int64_t>(wr_id) == refuse_post) {
      return absl::UnavailableError("ibv_post_send: No memory (errno 12)");
    }
    if (offset + bytes > buffer_bytes) violations.push_back("write past the buffer");
    pending_.push_back(wr_id);
    ++posted;
    max_outstanding = std::max<int64_t>(max_outstanding, static_cast<int64_t>(pending_.size()));
    if (static_cast<int>(pending_.size()) > window) violations.push_back("more than the window outstanding");
    return absl::OkStatus();
  }
  absl::Status Poll(std::vector<Completion>* out) override {
    if (never_complete) return absl::OkStatus();
    for (uint64_t id : pending_) {
      Completion c;
      c.wr_id = id;
      if (static_cast<int64_t>(id) == fail_completion) c.error = "work completion: transport retry counter exceeded";
      out->push_back(c);
      ++completed;
    }
    pending_.clear();
    return absl::OkStatus();
  }

 private:
  std::vector<uint64_t> pending_;
};

RdmaWriteOptions SmallOptions() {
  RdmaWriteOptions o;
  o.buffer_bytes = 8 << 10;
  o.write_bytes = 1 << 10;
  o.window = 4;
  o.duration = std::chrono::milliseconds(200);
  o.stall = std::chrono::milliseconds(100);
  return o;
}

TEST(RdmaWrites, KeepsTheWindowAndCountsCompletedWrites) {
  const RdmaWriteOptions o = SmallOptions();
  FakePath path(o);
  const auto start = std::chrono::steady_clock::now();
  v1::LinkRdmaResult r = RunRdmaWrites(path, o, [] { return false; });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.error(), "");
  EXPECT_TRUE(path.violations.empty()) << path.violations.front();
  EXPECT_GT(r.writes(), 0u);
  EXPECT_EQ(static_cast<int64_t>(r.writes()), path.posted);
  EXPECT_EQ(path.posted, path.completed);  // nothing left outstanding
  EXPECT_EQ(r.bytes(), r.writes() * o.write_bytes);
  EXPECT_EQ(path.max_outstanding, o.window);
  EXPECT_GE(wall, 0.19);
  EXPECT_LT(wall, 2.0);
  EXPECT_GT(r.seconds(), 0.15);
  EXPECT_LE(r.seconds(), wall);
}

TEST(RdmaWrites, AWriteThatNeverCompletesEndsTheTransferAtTheStallDeadline) {
  RdmaWriteOptions o = SmallOptions();
  o.duration = std::chrono::milliseconds(5000);
  FakePath path(o);
  path.never_complete = true;
  const auto start = std::chrono::steady_clock::now();
  v1::LinkRdmaResult r = RunRdmaWrites(path, o, [] { return false; });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.error(), "no RDMA write completed for 0.1 s (4 outstanding)");
  EXPECT_EQ(r.bytes(), 0u);
  EXPECT_LT(wall, 2.0);
}

TEST(RdmaWrites, AFailedCompletionOrPostIsNamed) {
  const RdmaWriteOptions o = SmallOptions();
  FakePath failing(o);
  failing.fail_completion = 9;
  v1::LinkRdmaResult r = RunRdmaWrites(failing, o, [] { return false; });
  EXPECT_EQ(r.error(), "write 9: work completion: transport retry counter exceeded");
  // Writes 0..11 were posted in windows of 4 and completed; all but write 9 count.
  EXPECT_EQ(r.writes(), 11u);
  EXPECT_EQ(r.bytes(), 11u * o.write_bytes);

  FakePath refusing(o);
  refusing.refuse_post = 6;
  r = RunRdmaWrites(refusing, o, [] { return false; });
  EXPECT_EQ(r.error(), "ibv_post_send: No memory (errno 12)");
}

TEST(RdmaWrites, StopsWhenCancelled) {
  RdmaWriteOptions o = SmallOptions();
  o.duration = std::chrono::milliseconds(10000);
  FakePath path(o);
  int calls = 0;
  const auto start = std::chrono::steady_clock::now();
  v1::LinkRdmaResult r = RunRdmaWrites(path, o, [&] { return ++calls > 100; });
  EXPECT_EQ(r.error(), "cancelled");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

}  // namespace
}  // namespace tandem::agentd
