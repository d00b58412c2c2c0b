// The verdict on one half of a link test, from counter deltas shaped like a CX-7's (mlx5 names)
// over a 10 s transfer: the issue's cases (13 Gb/s on a 200 Gb/s link with nothing lost; 120
// Gb/s against a ~126 Gb/s PCIe gen5 x4 ceiling; FEC-corrected bits alone) and every other
// kind, with the evidence lines that name the counters.
#include "agentd/link_verdict.h"

#include <gtest/gtest.h>

#include <iostream>

namespace tandem::agentd {
namespace {

constexpr double kSeconds = 10;

// Payload bytes that make `gbps` over kSeconds.
uint64_t BytesAt(double gbps) { return static_cast<uint64_t>(gbps * 1e9 / 8 * kSeconds); }

// One half of a split CX-7 port on a DGX Spark: 200 Gb/s link, PCIe gen5 x4, carrying `gbps`
// of payload with ~3% of framing and headers on the wire, nothing lost.
HalfSample Cx7Half(double gbps) {
  HalfSample s;
  s.interface = "enp1s0f0np0";
  s.peer_interface = "enp1s0f0np0";
  s.seconds = kSeconds;
  s.payload_bytes = BytesAt(gbps);
  const uint64_t wire = s.payload_bytes + s.payload_bytes / 33;
  const uint64_t segments = s.payload_bytes / 8948;  // MTU 9000
  s.tcp_segments_out = segments;
  s.tcp_retransmits = 0;
  s.sender_netdev = {{"tx_bytes", wire}, {"tx_packets", segments}, {"tx_dropped", 0}, {"rx_dropped", 0}};
  s.receiver_netdev = {{"rx_bytes", wire}, {"rx_packets", segments}, {"rx_dropped", 0}, {"rx_missed_errors", 0}};
  s.sender_ethtool = {{"tx_bytes_phy", wire + 1000}, {"tx_discards_phy", 0}, {"tx_packets_phy", segments}};
  s.receiver_ethtool = {{"rx_bytes_phy", wire + 1000}, {"rx_discards_phy", 0},      {"rx_out_of_buffer", 0},
                        {"rx_corrected_bits_phy", 0},  {"rx_pcs_symbol_err_phy", 0}, {"rx_err_lane_0_phy", 0},
                        {"rx_pause_ctrl_phy", 0}};
  s.speed_mbps = 200000;
  s.pcie_gbps_ceiling = 32.0 * 4 * 128 / 130;  // PCIe gen5 x4 after 128b/130b: ~126 Gb/s
  return s;
}

bool HasLine(const LinkVerdict& v, const std::string& part) {
  for (const std::string& line : v.evidence) {
    if (line.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string Show(const LinkVerdict& v) {
  std::string out = std::string(LinkVerdictName(v.kind)) + " " + std::to_string(v.gbps) + " Gb/s\n";
  for (const std::string& line : v.evidence) out += "  " + line + "\n";
  if (!v.hint.empty()) out += "  hint: " + v.hint + "\n";
  return out;
}

TEST(LinkVerdictTest, IssueCaseThirteenGbpsNothingLostIsHostNotSending) {
  const LinkVerdict v = JudgeHalf(Cx7Half(13), /*best_gbps_other_halves=*/0);
  std::cout << Show(v);
  EXPECT_EQ(v.kind, LinkVerdictKind::kHostNotSending) << Show(v);
  EXPECT_NEAR(v.gbps, 13, 0.01);
  EXPECT_TRUE(HasLine(v, "PCIe ceiling")) << Show(v);  // expected = min(200, ~126)
  EXPECT_TRUE(HasLine(v, "no discard or drop counter moved")) << Show(v);
  EXPECT_TRUE(HasLine(v, "tx_bytes_phy")) << Show(v);
  EXPECT_NE(v.hint.find("reboot or power-cycle"), std::string::npos) << v.hint;
  // The same half beside a sibling at 120 Gb/s is still slow, not unused (13 > 1% of 120).
  EXPECT_EQ(JudgeHalf(Cx7Half(13), 120).kind, LinkVerdictKind::kHostNotSending);
}

TEST(LinkVerdictTest, IssueCaseAtThePcieCeilingIsPcieBound) {
  const LinkVerdict v = JudgeHalf(Cx7Half(120), 118);
  std::cout << Show(v);
  EXPECT_EQ(v.kind, LinkVerdictKind::kPcieBound) << Show(v);
  EXPECT_TRUE(HasLine(v, "PCIe ceiling 126.0 Gb/s")) << Show(v);
  EXPECT_NE(v.hint.find("other half"), std::string::npos);
  // A ceiling above the link speed never binds: 120 Gb/s on a 100 Gb/s link counted differently.
  HalfSample fast_pcie = Cx7Half(90);
  fast_pcie.speed_mbps = 100000;
  EXPECT_EQ(JudgeHalf(fast_pcie, 0).kind, LinkVerdictKind::kHealthy) << Show(JudgeHalf(fast_pcie, 0));
}

TEST(LinkVerdictTest, FecCorrectedBitsAloneAreHealthy) {
  HalfSample s = Cx7Half(100);
  s.receiver_ethtool["rx_corrected_bits_phy"] = 123456;
  s.receiver_ethtool["rx_err_lane_0_phy"] = 123456;  // raw, before FEC: not an uncorrected error
  const LinkVerdict v = JudgeHalf(s, 100);
  std::cout << Show(v);
  EXPECT_EQ(v.kind, LinkVerdictKind::kHealthy) << Show(v);
  EXPECT_EQ(v.fec_corrected_bits, 123456u);
  EXPECT_EQ(v.ber, 0);
  EXPECT_TRUE(HasLine(v, "corrected 123456 bits (corrected, not errors)")) << Show(v);
  EXPECT_EQ(v.hint, "");
}

TEST(LinkVerdictTest, BerCountsUncorrectedErrorsAgainstPhysicalBitsOnly) {
  HalfSample s = Cx7Half(100);
  s.receiver_ethtool["rx_bytes_phy"] = 100'000'000'000;
  s.receiver_ethtool["rx_pcs_symbol_err_phy"] = 8;
  s.sender_ethtool["tx_bytes_phy"] = 100'000'000'000;
  LinkVerdict v = JudgeHalf(s, 0);
  EXPECT_DOUBLE_EQ(v.ber, 8.0 / 800e9);
  EXPECT_TRUE(HasLine(v, "BER 1e-11")) << Show(v);
  // No PHY byte counter (veth, lo, most virtual NICs): no BER, whatever the payload.
  s.receiver_ethtool.clear();
  s.sender_ethtool.clear();
  v = JudgeHalf(s, 0);
  EXPECT_EQ(v.ber, -1);
  EXPECT_FALSE(HasLine(v, "BER")) << Show(v);
}

TEST(LinkVerdictTest, DiscardCountersOnEitherSideAreDroppedOnPathEachNamed) {
  HalfSample s = Cx7Half(80);
  s.receiver_ethtool["rx_discards_phy"] = 412;
  s.receiver_ethtool["rx_out_of_buffer"] = 77;
  s.sender_ethtool["tx_discards_phy"] = 5;
  s.receiver_netdev["rx_dropped"] = 489;
  const LinkVerdict v = JudgeHalf(s, 0);
  std::cout << Show(v);
  EXPECT_EQ(v.kind, LinkVerdictKind::kDroppedOnPath) << Show(v);
  EXPECT_TRUE(HasLine(v, "receiver rx_discards_phy +412")) << Show(v);
  EXPECT_TRUE(HasLine(v, "receiver rx_out_of_buffer +77")) << Show(v);
  EXPECT_TRUE(HasLine(v, "sender tx_discards_phy +5")) << Show(v);
  EXPECT_TRUE(HasLine(v, "receiver rx_dropped +489")) << Show(v);
  EXPECT_FALSE(HasLine(v, "rx_pause_ctrl_phy")) << "pause frames are flow control, not loss";
  EXPECT_FALSE(v.hint.empty());
  // Other drivers' names match by pattern; an XDP program's drops are its own choice.
  HalfSample other = Cx7Half(80);
  other.receiver_netdev["rx_fifo_errors"] = 2;
  EXPECT_EQ(JudgeHalf(other, 0).kind, LinkVerdictKind::kDroppedOnPath);
  HalfSample xdp = Cx7Half(80);
  xdp.receiver_ethtool["rx_xdp_drop"] = 1000;
  EXPECT_EQ(JudgeHalf(xdp, 0).kind, LinkVerdictKind::kHealthy) << Show(JudgeHalf(xdp, 0));
}

TEST(LinkVerdictTest, RetransmitsAboveOnePercentAreLoss) {
  HalfSample s = Cx7Half(40);
  s.sender_ethtool.clear();  // veth-like: TCP is the only witness
  s.receiver_ethtool.clear();
  s.tcp_segments_out = 1'000'000;
  s.tcp_retransmits = 50000;  // 5%, as netem's loss in the netns test
  LinkVerdict v = JudgeHalf(s, 40);
  EXPECT_EQ(v.kind, LinkVerdictKind::kDroppedOnPath) << Show(v);
  EXPECT_TRUE(HasLine(v, "TCP retransmitted 50000 of 1000000 segments (over 1%)")) << Show(v);
  s.tcp_retransmits = 10001;  // just over 1%
  EXPECT_EQ(JudgeHalf(s, 40).kind, LinkVerdictKind::kDroppedOnPath) << Show(JudgeHalf(s, 40));
  // 0.17%: what a clean veth pair showed with both halves busy on a loaded 2-core host (the
  // receiver's backlog, no counter moved): listed, not called a lossy path.
  s.tcp_retransmits = 1700;
  v = JudgeHalf(s, 40);
  EXPECT_NE(v.kind, LinkVerdictKind::kDroppedOnPath) << Show(v);
  EXPECT_TRUE(HasLine(v, "TCP retransmitted 1700 of 1000000")) << Show(v);
}

TEST(LinkVerdictTest, BytesThatLeftButDidNotArriveAreLoss) {
  HalfSample s = Cx7Half(60);
  s.sender_ethtool["tx_bytes_phy"] = 80'000'000'000;
  s.receiver_ethtool["rx_bytes_phy"] = 76'000'000'000;  // 5% short, no counter moved
  LinkVerdict v = JudgeHalf(s, 0);
  EXPECT_EQ(v.kind, LinkVerdictKind::kDroppedOnPath) << Show(v);
  EXPECT_TRUE(HasLine(v, "did not arrive")) << Show(v);
  s.receiver_ethtool["rx_bytes_phy"] = 79'500'000'000;  // 0.6%: inside what the ends' timing blurs
  EXPECT_NE(JudgeHalf(s, 0).kind, LinkVerdictKind::kDroppedOnPath);
}

TEST(LinkVerdictTest, AHalfThatCarriedAlmostNothingIsUnused) {
  HalfSample s = Cx7Half(0);
  s.payload_bytes = 1 << 20;  // 1 MiB in 10 s
  const LinkVerdict v = JudgeHalf(s, 110);
  std::cout << Show(v);
  EXPECT_EQ(v.kind, LinkVerdictKind::kHalfUnused) << Show(v);
  EXPECT_TRUE(HasLine(v, "another half carried 110.0 Gb/s")) << Show(v);
  // Alone, the same half is judged against its link: not sending.
  EXPECT_EQ(JudgeHalf(s, 0).kind, LinkVerdictKind::kHostNotSending);
}

// A veth half between network namespaces: no link speed, no PCIe link, no PHY counters.
HalfSample VethHalf(double gbps) {
  HalfSample s = Cx7Half(gbps);
  s.speed_mbps = -1;
  s.pcie_gbps_ceiling = 0;
  s.sender_ethtool.clear();
  s.receiver_ethtool.clear();
  return s;
}

TEST(LinkVerdictTest, UnknownLinkIsJudgedAgainstTheBestOtherHalf) {
  HalfSample s = VethHalf(5);
  LinkVerdict v = JudgeHalf(s, 20);
  EXPECT_EQ(v.kind, LinkVerdictKind::kHostNotSending) << Show(v);
  EXPECT_TRUE(HasLine(v, "the best other half")) << Show(v);
  EXPECT_EQ(JudgeHalf(VethHalf(15), 20).kind, LinkVerdictKind::kHealthy);
  // Nothing at all to compare with: healthy, and the evidence says so.
  v = JudgeHalf(s, 0);
  EXPECT_EQ(v.kind, LinkVerdictKind::kHealthy) << Show(v);
  EXPECT_TRUE(HasLine(v, "nothing to compare")) << Show(v);
  // No counters read at all: the evidence does not claim that none moved.
  s.sender_netdev.clear();
  s.receiver_netdev.clear();
  v = JudgeHalf(s, 20);
  EXPECT_TRUE(HasLine(v, "no discard or drop counter was read")) << Show(v);
  EXPECT_FALSE(HasLine(v, "moved on either side")) << Show(v);
}

TEST(LinkVerdictTest, FailedOrEmptyTransferHasNoData) {
  HalfSample s = Cx7Half(100);
  s.error = "connect 192.168.100.2:0: timed out";
  LinkVerdict v = JudgeHalf(s, 0);
  EXPECT_EQ(v.kind, LinkVerdictKind::kNoData);
  EXPECT_TRUE(HasLine(v, "timed out")) << Show(v);
  s.error.clear();
  s.seconds = 0;
  v = JudgeHalf(s, 0);
  EXPECT_EQ(v.kind, LinkVerdictKind::kNoData);
  EXPECT_EQ(v.gbps, 0);
}

TEST(LinkVerdictTest, NamesAreStable) {
  EXPECT_STREQ(LinkVerdictName(LinkVerdictKind::kHealthy), "healthy");
  EXPECT_STREQ(LinkVerdictName(LinkVerdictKind::kHostNotSending), "host-not-sending");
  EXPECT_STREQ(LinkVerdictName(LinkVerdictKind::kDroppedOnPath), "dropped-on-path");
  EXPECT_STREQ(LinkVerdictName(LinkVerdictKind::kPcieBound), "pcie-bound");
  EXPECT_STREQ(LinkVerdictName(LinkVerdictKind::kHalfUnused), "half-unused");
  EXPECT_STREQ(LinkVerdictName(LinkVerdictKind::kNoData), "no-data");
}

}  // namespace
}  // namespace tandem::agentd
