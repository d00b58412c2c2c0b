// The link test's two ends on loopback, in process: bytes sent are the bytes counted, a wrong
// token is refused, the limits are refused before anything listens or connects, and nothing
// listens afterwards. The RDMA line without devices.
#include "agentd/link_transfer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "agentd/link_rdma.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

const std::string kToken(kLinkTokenBytes, 'k');

// lo's 127.0.0.1 when this host (namespace) has it up.
bool HasLoopback(const std::vector<LocalIpv4>& local) {
  for (const LocalIpv4& l : local) {
    if (l.interface == "lo" && l.address == "127.0.0.1") return true;
  }
  return false;
}

v1::LinkReceiveRequest ReceiveRequest(uint32_t streams) {
  v1::LinkReceiveRequest r;
  v1::LinkEndpoint* e = r.add_endpoints();
  e->set_interface("lo");
  e->set_ipv4("127.0.0.1");
  r.set_token(kToken);
  r.set_streams(streams);
  r.set_duration_ms(1000);
  return r;
}

v1::LinkSendRequest SendRequest(uint32_t port, uint32_t streams, const std::string& token) {
  v1::LinkSendRequest r;
  v1::LinkTarget* t = r.add_targets();
  t->set_interface("lo");
  t->set_local_ipv4("127.0.0.1");
  t->set_remote_ipv4("127.0.0.1");
  t->set_port(port);
  r.set_token(token);
  r.set_streams(streams);
  r.set_duration_ms(1000);
  return r;
}

bool PortListens(uint32_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  ::close(fd);
  return ok;
}

struct Transfer {
  absl::StatusOr<v1::LinkSendResponse> sent = absl::UnknownError("not run");
  v1::LinkReceiveSummary got;
  uint32_t port = 0;
};

// Both ends on lo: a receiver expecting `streams`, a sender with `token`. The receiver is told to
// stop once the sender has returned (after a wrong token it would wait out its grace), and is
// gone when this returns.
Transfer RunTransfer(const FactsRoots& roots, uint32_t streams, const std::string& token) {
  Transfer t;
  const std::vector<LocalIpv4> local = ListLocalIpv4();
  auto receiver = LinkReceiver::Open(roots, ReceiveRequest(streams), local);
  EXPECT_TRUE(receiver.ok()) << receiver.status();
  if (!receiver.ok()) return t;
  t.port = (*receiver)->Listening().ports(0);
  std::atomic<bool> sender_done{false};
  auto summary = std::async(std::launch::async, [&] { return (*receiver)->Run([&] { return sender_done.load(); }); });
  t.sent = RunLinkSend(roots, SendRequest(t.port, streams, token), local, [] { return false; });
  sender_done.store(true);
  t.got = summary.get();
  return t;
}

TEST(LinkTransferTest, LoopbackBytesSentAreBytesCounted) {
  if (!HasLoopback(ListLocalIpv4())) GTEST_SKIP() << "no 127.0.0.1 on lo here";
  const Transfer t = RunTransfer(FactsRoots{}, 2, kToken);
  ASSERT_GT(t.port, 0u);
  ASSERT_TRUE(t.sent.ok()) << t.sent.status();
  ASSERT_EQ(t.sent->results_size(), 1);
  const v1::LinkSendResult& s = t.sent->results(0);
  EXPECT_EQ(s.streams_ok(), 2u) << s.error();
  EXPECT_GT(s.bytes_sent(), 1u << 20);
  EXPECT_GE(s.seconds(), 1.0);
  EXPECT_GT(s.tcp_segments_out(), 0u);
  ASSERT_EQ(t.got.results_size(), 1);
  const v1::LinkReceiveResult& r = t.got.results(0);
  EXPECT_EQ(r.interface(), "lo");
  EXPECT_EQ(r.payload_bytes(), s.bytes_sent()) << "every byte sent after the token arrived";
  EXPECT_EQ(r.connections(), 2u);
  EXPECT_EQ(r.refused(), 0u);
  EXPECT_GT(r.seconds(), 0.5);
  EXPECT_EQ(r.error(), "");
  // Both ends read lo's counters around the transfer: it carried at least the payload.
  EXPECT_EQ(s.counters().error(), "");
  EXPECT_GE(s.counters().netdev().at("tx_bytes"), s.bytes_sent());
  EXPECT_GE(r.counters().netdev().at("rx_bytes"), r.payload_bytes());
  EXPECT_FALSE(PortListens(t.port)) << "the listener outlived the test";
}

// A veth says 10000 Mb/s whatever it carries: a speed counts only for an interface with a device.
TEST(LinkTransferTest, VirtualInterfaceSpeedIsUnknown) {
  if (!HasLoopback(ListLocalIpv4())) GTEST_SKIP() << "no 127.0.0.1 on lo here";
  testing::TempDir sys;
  const std::filesystem::path lo = std::filesystem::path(sys.path()) / "class/net/lo";
  std::filesystem::create_directories(lo);
  std::ofstream(lo / "speed") << "10000\n";
  auto speeds = [&] {
    const Transfer t = RunTransfer(FactsRoots{sys.path(), "/proc"}, 1, kToken);
    EXPECT_TRUE(t.sent.ok()) << t.sent.status();
    return std::make_pair(t.sent.ok() ? t.sent->results(0).counters().speed_mbps() : 0,
                          t.got.results(0).counters().speed_mbps());
  };
  EXPECT_EQ(speeds(), std::make_pair(int64_t{-1}, int64_t{-1}));
  std::filesystem::create_directories(lo / "device");
  EXPECT_EQ(speeds(), std::make_pair(int64_t{10000}, int64_t{10000}));
}

TEST(LinkTransferTest, WrongTokenIsRefusedAndCountsNothing) {
  if (!HasLoopback(ListLocalIpv4())) GTEST_SKIP() << "no 127.0.0.1 on lo here";
  const Transfer t = RunTransfer(FactsRoots{}, 1, std::string(kLinkTokenBytes, 'x'));
  ASSERT_TRUE(t.sent.ok()) << t.sent.status();
  EXPECT_EQ(t.sent->results(0).streams_ok(), 0u) << "the receiver closed on the wrong token";
  EXPECT_NE(t.sent->results(0).error(), "");
  const v1::LinkReceiveResult& r = t.got.results(0);
  EXPECT_EQ(r.payload_bytes(), 0u);
  EXPECT_EQ(r.connections(), 0u);
  EXPECT_EQ(r.refused(), 1u);
  EXPECT_NE(r.error().find("token"), std::string::npos) << r.error();
}

// A port on 127.0.0.1 that nothing listens on (bound, then closed).
uint32_t ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

// One half's streams cannot connect: the streams' header tells the receiver, which stops when the
// other half is done instead of waiting out its 15 s grace for streams that will not come.
TEST(LinkTransferTest, ReceiverStopsOnceTheStreamsThatConnectedAreDone) {
  const std::vector<LocalIpv4> local = ListLocalIpv4();
  if (!HasLoopback(local)) GTEST_SKIP() << "no 127.0.0.1 on lo here";
  v1::LinkReceiveRequest rreq = ReceiveRequest(2);
  *rreq.add_endpoints() = rreq.endpoints(0);
  auto receiver = LinkReceiver::Open(FactsRoots{}, rreq, local);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  const auto start = std::chrono::steady_clock::now();
  auto summary = std::async(std::launch::async, [&] { return (*receiver)->Run([] { return false; }); });
  v1::LinkSendRequest sreq = SendRequest((*receiver)->Listening().ports(0), 2, kToken);
  *sreq.add_targets() = sreq.targets(0);
  sreq.mutable_targets(1)->set_port(ClosedPort());
  auto sent = RunLinkSend(FactsRoots{}, sreq, local, [] { return false; });
  const v1::LinkReceiveSummary got = summary.get();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(sent->results(0).streams_ok(), 2u);
  EXPECT_EQ(sent->results(1).streams_ok(), 0u);
  EXPECT_NE(sent->results(1).error().find("Connection refused"), std::string::npos) << sent->results(1).error();
  EXPECT_EQ(got.results(0).payload_bytes(), sent->results(0).bytes_sent());
  EXPECT_EQ(got.results(1).connections(), 0u);
  EXPECT_LT(seconds, 5.0) << "the receiver waited for streams the sender never connected";
}

TEST(LinkTransferTest, LimitsAreRefusedBeforeAnythingListens) {
  const std::vector<LocalIpv4> local = {{"eth9", "10.1.2.3", 24}};
  auto refused = [&](v1::LinkReceiveRequest r) {
    auto got = LinkReceiver::Open(FactsRoots{}, r, local);
    return got.ok() ? std::string("accepted") : std::string(got.status().message());
  };
  v1::LinkReceiveRequest ok = ReceiveRequest(4);
  ok.mutable_endpoints(0)->set_interface("eth9");
  ok.mutable_endpoints(0)->set_ipv4("10.1.2.3");
  v1::LinkReceiveRequest r = ok;
  r.set_duration_ms(0);
  EXPECT_NE(refused(r).find("duration must be 1..60 s"), std::string::npos);
  r = ok;
  r.set_duration_ms(61000);
  EXPECT_NE(refused(r).find("duration"), std::string::npos);
  r = ok;
  r.set_streams(17);
  EXPECT_NE(refused(r).find("streams must be 1..16"), std::string::npos);
  r = ok;
  r.set_token("short");
  EXPECT_NE(refused(r).find("token must be 32 bytes"), std::string::npos);
  r = ok;
  r.mutable_endpoints(0)->set_interface("nosuch0");
  EXPECT_NE(refused(r).find("\"nosuch0\" does not exist"), std::string::npos);
  r = ok;
  r.mutable_endpoints(0)->set_ipv4("10.1.2.4");
  EXPECT_NE(refused(r).find("does not hold 10.1.2.4 (it has 10.1.2.3/24)"), std::string::npos);
  r = ok;
  r.clear_endpoints();
  EXPECT_NE(refused(r).find("endpoints: expected 1..16"), std::string::npos);

  // The sender sends only into the subnet of the interface it sends from.
  v1::LinkSendRequest s = SendRequest(5000, 1, kToken);
  s.mutable_targets(0)->set_interface("eth9");
  s.mutable_targets(0)->set_local_ipv4("10.1.2.3");
  s.mutable_targets(0)->set_remote_ipv4("10.1.3.4");
  auto sent = RunLinkSend(FactsRoots{}, s, local, [] { return false; });
  ASSERT_FALSE(sent.ok());
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sent.status().message().find("not in the subnet of eth9"), std::string::npos) << sent.status();
}

TEST(LinkTransferTest, SubnetMembership) {
  EXPECT_TRUE(SameIpv4Subnet({"a", "10.1.2.3", 24}, "10.1.2.200"));
  EXPECT_FALSE(SameIpv4Subnet({"a", "10.1.2.3", 24}, "10.1.3.1"));
  EXPECT_TRUE(SameIpv4Subnet({"a", "10.1.2.3", 31}, "10.1.2.2"));
  EXPECT_FALSE(SameIpv4Subnet({"a", "10.1.2.3", 32}, "10.1.2.2"));
  EXPECT_TRUE(SameIpv4Subnet({"lo", "127.0.0.1", 8}, "127.9.9.9"));
  EXPECT_FALSE(SameIpv4Subnet({"a", "10.1.2.3", 24}, "not-an-address"));
}

TEST(LinkTransferTest, RdmaLineSaysWhatItFound) {
  EXPECT_EQ(DescribeRdma(std::vector<std::string>{}), "rdma: no devices");
  EXPECT_EQ(DescribeRdma(absl::UnimplementedError("built without libibverbs")),
            "rdma: not tested (built without libibverbs)");
  EXPECT_NE(DescribeRdma(std::vector<std::string>{"mlx5_0", "mlx5_1"}).find("devices mlx5_0, mlx5_1"),
            std::string::npos);
  EXPECT_EQ(DescribeRdma().rfind("rdma: ", 0), 0u) << DescribeRdma();
}

}  // namespace
}  // namespace tandem::agentd
