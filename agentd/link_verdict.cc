#include "agentd/link_verdict.h"

#include <algorithm>
#include <cstdio>

namespace tandem::agentd {
namespace {

// Thresholds of the rules (docs/linktest.md, "Verdicts").
// > 1% of segments out retransmitted: loss. A clean veth pair carrying both halves at once on a
// 2-core host retransmits 0.05-0.17% (the receiving host, short of CPU, drops from its backlog, and
// no counter on either side moves); netem's 5% and a 100 KB tail-drop queue give 5% and 22%.
// Retransmits below this are still listed as evidence on the verdict.
constexpr double kRetransmitFraction = 0.01;
constexpr double kPhyGapFraction = 0.01;        // sender's tx_bytes_phy > receiver's rx_bytes_phy by 1%
constexpr double kPcieBoundFraction = 0.85;     // at 85% of the PCIe ceiling or above
constexpr double kUnusedFraction = 0.01;        // under 1% of the best other half
constexpr double kNotSendingFraction = 0.5;     // under half of what the link could carry

constexpr char kHintNotSending[] =
    "the host is not putting bytes on the wire: after re-seating a cable, reboot or power-cycle the node";
constexpr char kHintDropped[] =
    "bytes are lost between the hosts: check the cable or transceiver, the switch port and its pause/flow "
    "control, and on the receiver the ring size and CPU (rx_out_of_buffer: the host could not take them)";
constexpr char kHintPcie[] =
    "this half is at its PCIe link's ceiling: more bandwidth needs the other half of the port at the same time";
constexpr char kHintUnused[] =
    "this interface carried almost nothing while the others did: check its route and address (both halves "
    "need their own subnet) and that the transfer used it";

std::string Fmt(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, a);
  return buf;
}

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// A counter that counts packets the NIC or the kernel gave up on. XDP drops are a program's
// choice, not loss. Names differ between drivers, so they match by pattern.
bool IsLossCounter(const std::string& name) {
  if (Contains(name, "xdp")) return false;
  for (const char* part : {"discard", "drop", "out_of_buffer", "missed", "fifo_err", "over_err", "crc_err"}) {
    if (Contains(name, part)) return true;
  }
  return false;
}

// FEC-corrected bits: the FEC did its job; reported, never counted as errors.
bool IsCorrectedCounter(const std::string& name) {
  return Contains(name, "corrected") && !Contains(name, "uncorrect");
}

// Bit errors the FEC could not fix (or no FEC ran): mlx5's rx_pcs_symbol_err_phy, and any
// driver's "*uncorrect*" counter. rx_err_lane_*_phy are raw errors before FEC, so they are not
// uncorrected and do not enter the BER.
bool IsUncorrectedCounter(const std::string& name) {
  return name == "rx_pcs_symbol_err_phy" || Contains(name, "uncorrect");
}

const uint64_t* Find(const std::map<std::string, uint64_t>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

// "side name +delta" for every loss counter that moved.
void MovedLossCounters(const char* side, const std::map<std::string, uint64_t>& deltas,
                       std::vector<std::string>* out) {
  for (const auto& [name, delta] : deltas) {
    if (delta > 0 && IsLossCounter(name)) out->push_back(std::string(side) + " " + name + " +" + std::to_string(delta));
  }
}

// The rules in order; the first that holds decides (kind, evidence, hint). `v.gbps` is set.
void ApplyRules(const HalfSample& s, double best_gbps_other_halves, LinkVerdict& v) {
  const uint64_t* rx_phy = Find(s.receiver_ethtool, "rx_bytes_phy");
  const uint64_t* tx_phy = Find(s.sender_ethtool, "tx_bytes_phy");

  // Loss: any discard/drop counter on either side, TCP retransmits, or bytes that left the
  // sender's PHY and never reached the receiver's.
  std::vector<std::string> lost;
  MovedLossCounters("sender", s.sender_netdev, &lost);
  MovedLossCounters("sender", s.sender_ethtool, &lost);
  MovedLossCounters("receiver", s.receiver_netdev, &lost);
  MovedLossCounters("receiver", s.receiver_ethtool, &lost);
  const bool retransmitting =
      s.tcp_retransmits > 0 && static_cast<double>(s.tcp_retransmits) >
                                   kRetransmitFraction * static_cast<double>(s.tcp_segments_out);
  const std::string retrans_text = "TCP retransmitted " + std::to_string(s.tcp_retransmits) + " of " +
                                   std::to_string(s.tcp_segments_out) + " segments";
  if (retransmitting) lost.push_back(retrans_text + " (over 1%)");
  if (tx_phy && rx_phy && static_cast<double>(*tx_phy) > static_cast<double>(*rx_phy) * (1.0 + kPhyGapFraction)) {
    lost.push_back("sender tx_bytes_phy +" + std::to_string(*tx_phy) + " but receiver rx_bytes_phy +" +
                   std::to_string(*rx_phy) + ": bytes left and did not arrive");
  }
  if (!lost.empty()) {
    v.kind = LinkVerdictKind::kDroppedOnPath;
    v.evidence.insert(v.evidence.end(), lost.begin(), lost.end());
    v.hint = kHintDropped;
    return;
  }
  // "Nothing lost" only means something when there were loss counters to watch.
  size_t watched = 0;
  for (const auto* m : {&s.sender_netdev, &s.sender_ethtool, &s.receiver_netdev, &s.receiver_ethtool}) {
    for (const auto& [name, delta] : *m) watched += IsLossCounter(name) ? 1 : 0;
  }
  std::vector<std::string> clean;
  clean.push_back(watched > 0 ? "no discard or drop counter moved on either side (" + std::to_string(watched) +
                                    " watched)"
                              : "no discard or drop counter was read on either side");
  if (s.tcp_segments_out > 0) clean.push_back(retrans_text);
  if (tx_phy && rx_phy) {
    clean.push_back("sender tx_bytes_phy +" + std::to_string(*tx_phy) + ", receiver rx_bytes_phy +" +
                    std::to_string(*rx_phy) + ": what left arrived");
  }

  const double link_gbps = s.speed_mbps > 0 ? static_cast<double>(s.speed_mbps) / 1000.0 : 0;
  // A near-idle half keeps its significant digits ("0.000839 Gb/s", not "0.0").
  const std::string rate_text = Fmt(v.gbps >= 1 ? "%.1f Gb/s" : "%.3g Gb/s", v.gbps);
  if (s.pcie_gbps_ceiling > 0 && link_gbps > 0 && s.pcie_gbps_ceiling < link_gbps &&
      v.gbps >= kPcieBoundFraction * s.pcie_gbps_ceiling) {
    v.kind = LinkVerdictKind::kPcieBound;
    v.evidence.push_back(rate_text + " is " + Fmt("%.0f%%", 100.0 * v.gbps / s.pcie_gbps_ceiling) +
                         " of the PCIe ceiling " + Fmt("%.1f Gb/s", s.pcie_gbps_ceiling) + ", below the link's " +
                         Fmt("%.0f Gb/s", link_gbps));
    v.evidence.insert(v.evidence.end(), clean.begin(), clean.end());
    v.hint = kHintPcie;
    return;
  }

  if (best_gbps_other_halves > 0 && v.gbps < kUnusedFraction * best_gbps_other_halves) {
    v.kind = LinkVerdictKind::kHalfUnused;
    v.evidence.push_back(rate_text + " while another half carried " + Fmt("%.1f Gb/s", best_gbps_other_halves) +
                         " (" + std::to_string(s.payload_bytes) + " payload bytes)");
    v.hint = kHintUnused;
    return;
  }

  // What this half should carry: the slower of the wire and the PCIe link when known, else the
  // best sibling (two halves of one port on equal links).
  double expected = 0;
  std::string expected_from;
  if (link_gbps > 0 && (s.pcie_gbps_ceiling <= 0 || link_gbps <= s.pcie_gbps_ceiling)) {
    expected = link_gbps;
    expected_from = "the link speed";
  } else if (s.pcie_gbps_ceiling > 0) {
    expected = s.pcie_gbps_ceiling;
    expected_from = "the PCIe ceiling";
  } else if (best_gbps_other_halves > 0) {
    expected = best_gbps_other_halves;
    expected_from = "the best other half";
  }
  const std::string share_text = expected > 0 ? rate_text + " is " + Fmt("%.0f%%", 100.0 * v.gbps / expected) +
                                                    " of " + Fmt("%.1f Gb/s", expected) + " (" + expected_from + ")"
                                              : "";
  if (expected > 0 && v.gbps < kNotSendingFraction * expected) {
    v.kind = LinkVerdictKind::kHostNotSending;
    v.evidence.push_back(share_text);
    v.evidence.insert(v.evidence.end(), clean.begin(), clean.end());
    v.hint = kHintNotSending;
    return;
  }

  v.kind = LinkVerdictKind::kHealthy;
  if (expected > 0) {
    v.evidence.push_back(share_text);
  } else {
    v.evidence.push_back(rate_text + "; nothing to compare it with (link speed, PCIe link and other halves unknown)");
  }
  v.evidence.insert(v.evidence.end(), clean.begin(), clean.end());
}

}  // namespace

const char* LinkVerdictName(LinkVerdictKind kind) {
  switch (kind) {
    case LinkVerdictKind::kHealthy: return "healthy";
    case LinkVerdictKind::kHostNotSending: return "host-not-sending";
    case LinkVerdictKind::kDroppedOnPath: return "dropped-on-path";
    case LinkVerdictKind::kPcieBound: return "pcie-bound";
    case LinkVerdictKind::kHalfUnused: return "half-unused";
    case LinkVerdictKind::kNoData: return "no-data";
  }
  return "unknown";
}

LinkVerdict JudgeHalf(const HalfSample& s, double best_gbps_other_halves) {
  LinkVerdict v;
  if (!s.error.empty()) {
    v.kind = LinkVerdictKind::kNoData;
    v.evidence.push_back("transfer failed: " + s.error);
    return v;
  }
  if (s.seconds <= 0) {
    v.kind = LinkVerdictKind::kNoData;
    v.evidence.push_back("the transfer did not run (no duration)");
    return v;
  }
  v.gbps = static_cast<double>(s.payload_bytes) * 8.0 / s.seconds / 1e9;
  ApplyRules(s, best_gbps_other_halves, v);

  // What the physical layer says, whatever the verdict: errors the receiver's FEC fixed, and
  // the BER of what it could not, against the bits that crossed the wire (not the payload).
  uint64_t uncorrected = 0;
  for (const auto& [name, delta] : s.receiver_ethtool) {
    if (IsCorrectedCounter(name)) v.fec_corrected_bits += delta;
    if (IsUncorrectedCounter(name)) uncorrected += delta;
  }
  const uint64_t* rx_phy = Find(s.receiver_ethtool, "rx_bytes_phy");
  if (rx_phy && *rx_phy > 0) v.ber = static_cast<double>(uncorrected) / (static_cast<double>(*rx_phy) * 8.0);
  if (v.fec_corrected_bits > 0) {
    v.evidence.push_back("receiver FEC corrected " + std::to_string(v.fec_corrected_bits) +
                         " bits (corrected, not errors)");
  }
  if (v.ber >= 0) {
    v.evidence.push_back("BER " + Fmt("%.3g", v.ber) + " (" + std::to_string(uncorrected) +
                         " uncorrected bit errors / rx_bytes_phy x 8)");
  }
  return v;
}

}  // namespace tandem::agentd
