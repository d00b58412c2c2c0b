// The verdict on one interface ("half") of a link test, with the evidence that led to it. Pure:
// the inputs are counter deltas and the transfer's own figures, so every case is testable
// without hardware. See docs/linktest.md for the rules.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tandem::agentd {

enum class LinkVerdictKind {
  kHealthy,
  kHostNotSending,  // slow, and nothing was lost: the sender's host did not put the bytes out
  kDroppedOnPath,   // a discard/out-of-buffer counter moved, or TCP retransmitted
  kPcieBound,       // the rate sits at the NIC's PCIe link ceiling for this half
  kHalfUnused,      // the interface carried (almost) nothing while the others did
  kNoData,          // the transfer on this interface failed or did not run
};

// Everything known about one interface's share of one timed transfer (sender side and receiver
// side of the same half).
struct HalfSample {
  std::string interface;       // sender's interface name
  std::string peer_interface;  // receiver's interface name
  double seconds = 0;          // transfer duration
  uint64_t payload_bytes = 0;  // application bytes the receiver got
  uint64_t tcp_retransmits = 0;  // from TCP_INFO over all of this half's streams (0 for RDMA)
  uint64_t tcp_segments_out = 0;
  std::map<std::string, uint64_t> sender_netdev, sender_ethtool;      // deltas
  std::map<std::string, uint64_t> receiver_netdev, receiver_ethtool;  // deltas
  int64_t speed_mbps = -1;          // negotiated link speed, -1 unknown
  double pcie_gbps_ceiling = 0;     // 0 unknown
  std::string error;                // non-empty: the transfer failed (kNoData)
};

struct LinkVerdict {
  LinkVerdictKind kind = LinkVerdictKind::kNoData;
  double gbps = 0;                     // payload Gb/s
  std::vector<std::string> evidence;   // human-readable lines, each naming the counters it used
  std::string hint;                    // what the operator should do ("" for healthy)
  uint64_t fec_corrected_bits = 0;     // reported as corrected, never as errors
  double ber = -1;                     // uncorrected bit errors / physical bits; -1 when unknown
};

// Judges one half. `best_gbps_other_halves` is the fastest other half of the same run (0 when
// this is the only one): a half far below its siblings with nothing lost is "host not sending".
LinkVerdict JudgeHalf(const HalfSample& s, double best_gbps_other_halves);

const char* LinkVerdictName(LinkVerdictKind kind);  // "healthy", "host-not-sending", ...

}  // namespace tandem::agentd
