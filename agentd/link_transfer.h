// The two ends of one `tandemctl linktest` transfer (Agent.LinkReceive / Agent.LinkSend, see
// docs/linktest.md): plain TCP between the agents' hosts, many streams per interface and every
// interface at once, so that a link made of several halves (a CX-7 port as two PCIe x4
// interfaces) is measured as it is used. The interface counters are read before and after on
// both ends (agentd/link_counters.h); the controller judges each half from both sides.
//
// On the wire, every stream starts with the 32-byte token and then one byte per target: how many
// streams the sender connected to each, so that the receiver does not wait for streams that
// will never come; the payload follows.
//
// Every blocking call has a deadline: connects 5 s, a send that moves nothing for 2 s fails its
// stream, the sender waits at most 5 s for the receiver to take the last bytes, and the receiver
// stops duration + 15 s after it started listening whatever the sender does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agentd/link_rdma.h"
#include "agentd/node_facts.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::agentd {

inline constexpr uint32_t kLinkMinDurationMs = 1000;
inline constexpr uint32_t kLinkMaxDurationMs = 60000;
inline constexpr uint32_t kLinkMaxStreams = 16;
inline constexpr int kLinkMaxEndpoints = 16;
inline constexpr size_t kLinkTokenBytes = 32;
// How long the receiver waits beyond the duration for connects and the last bytes.
inline constexpr std::chrono::seconds kLinkReceiveGrace{15};

// An IPv4 address of a local interface with its prefix length (from getifaddrs).
struct LocalIpv4 {
  std::string interface;
  std::string address;  // dotted
  int prefix = 32;
};

// Every IPv4 address of this host's (this network namespace's) interfaces.
std::vector<LocalIpv4> ListLocalIpv4();

// True when `address` lies in address/prefix of `net`.
bool SameIpv4Subnet(const LocalIpv4& net, const std::string& address);

// The receiving end. Open binds one listener per endpoint (ephemeral port; none for transport
// "rdma"), opens the RDMA halves the transport asks for, and reads the counters; Run accepts and
// counts (the RDMA halves wait for their sender meanwhile); the destructor closes whatever is
// still open.
class LinkReceiver {
 public:
  // INVALID_ARGUMENT for a limit or an endpoint whose interface does not hold its address;
  // the bind's failure otherwise. `local` is this host's addresses (ListLocalIpv4(); a test may
  // pass its own).
  static absl::StatusOr<std::unique_ptr<LinkReceiver>> Open(const FactsRoots& roots,
                                                            const v1::LinkReceiveRequest& request,
                                                            const std::vector<LocalIpv4>& local);
  ~LinkReceiver();
  LinkReceiver(const LinkReceiver&) = delete;
  LinkReceiver& operator=(const LinkReceiver&) = delete;

  v1::LinkListening Listening() const;

  // Accepts the sender's connections and counts their payload until every expected stream has
  // closed, the deadline passes or `cancelled()` is true; then reads the counters again and
  // closes the listeners. Call once.
  v1::LinkReceiveSummary Run(const std::function<bool()>& cancelled);

 private:
  struct Endpoint;
  LinkReceiver(const FactsRoots& roots, const v1::LinkReceiveRequest& request, LinkTransport transport);
  void ReadConnection(Endpoint* ep, int fd, const std::atomic<bool>& stop);

  FactsRoots roots_;
  std::string token_;
  uint32_t streams_;
  LinkTransport transport_;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

// The sending end: connects `streams` TCP streams per target (all before any sends), then sends
// on all of them at once for the duration; then, on the targets whose `rdma` names the
// receiver's queue pair, RDMA WRITEs on all of them at once for the duration (agentd/link_rdma.h;
// transport "rdma": those alone, and they are the halves' payload). INVALID_ARGUMENT for a
// limit, an interface that does not hold the local address, or a remote address outside that
// interface's subnet; a stream's own failure is in its target's result.
absl::StatusOr<v1::LinkSendResponse> RunLinkSend(const FactsRoots& roots, const v1::LinkSendRequest& request,
                                                 const std::vector<LocalIpv4>& local,
                                                 const std::function<bool()>& cancelled);

}  // namespace tandem::agentd
