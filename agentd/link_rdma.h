// The RDMA side of `tandemctl linktest` (docs/linktest.md "RDMA"): a timed RDMA WRITE transfer
// on every half whose interface has a RoCE v2 port, beside or instead of the TCP transfer
// (agentd/link_transfer.h), through libibverbs when the build found it (TANDEM_HAVE_IBVERBS).
//
// Per half: the receiver opens the port's device objects (PD, an 8 MiB buffer registered for
// remote writes, CQ, RC queue pair) and a TCP control listener on the half's address, and hands
// its queue pair's identity (LinkRdmaQp) to the controller in LinkListening. The sender gets it
// in LinkTarget.rdma, opens the same objects, connects the control stream (token + its own
// LinkRdmaQp), waits until the receiver's queue pair is ready to receive (RTR), moves its own to
// RTS, keeps a window of 1 MiB RDMA WRITEs outstanding for the duration, and sends the receiver
// its byte count (writes are one-sided: the receiver's CPU never sees them).
//
// The GID index is chosen from the interface's IPv4 address (the RoCE v2 entry that maps it),
// never a fixed index: a fixed index is what went wrong for the operators ("GID index guessed
// wrong"), since the table's order depends on the addresses and the RoCE versions configured.
//
// Nothing of the verbs path has run on RDMA hardware yet (the machines that built it had none).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agentd/link_socket.h"
#include "agentd/node_facts.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::agentd {

// The names of the RDMA devices libibverbs lists (empty: none). UNIMPLEMENTED when the agent
// was built without libibverbs.
absl::StatusOr<std::vector<std::string>> ListRdmaDevices();

// The one-line report for LinkSendResponse.rdma, from what ListRdmaDevices returned.
std::string DescribeRdma(const absl::StatusOr<std::vector<std::string>>& devices);
inline std::string DescribeRdma() { return DescribeRdma(ListRdmaDevices()); }

// ---------------------------------------------------------------------------------------------
// Which device, port and GID carry an interface's address.

struct RdmaPortChoice {
  std::string device;  // "mlx5_0"
  uint32_t port = 0;
  uint32_t gid_index = 0;
  std::string gid;     // as sysfs prints it
};

// The RDMA port whose GID table has a RoCE v2 entry for `ipv4` (IPv4-mapped) on netdev
// `interface`, from <sysfs>/class/infiniband/*/ports/*/{gids,gid_attrs/types,gid_attrs/ndevs}.
// NOT_FOUND saying what was seen otherwise (no device names the interface; it does, but with
// RoCE v1 entries or other addresses only).
absl::StatusOr<RdmaPortChoice> FindRoceV2Port(const FactsRoots& roots, const std::string& interface,
                                              const std::string& ipv4);

// A port's counters (<sysfs>/class/infiniband/DEV/ports/N/counters/*). The *_data counters
// count 4-byte words (the InfiniBand PortCounters definition); they come back as *_bytes, x4.
absl::StatusOr<std::map<std::string, uint64_t>> ReadRdmaPortCounters(const FactsRoots& roots, const std::string& device,
                                                                     uint32_t port);

// ---------------------------------------------------------------------------------------------
// `--transport`.

enum class LinkTransport { kTcp, kRdma, kBoth };

// "tcp", "rdma", "both"; "" is both (RDMA where it exists, TCP always). INVALID_ARGUMENT else.
absl::StatusOr<LinkTransport> ParseLinkTransport(std::string_view text);

// ---------------------------------------------------------------------------------------------
// The control stream's frames: a 4-byte big-endian length, then the serialized message.

inline constexpr size_t kRdmaMaxFrame = 4096;

std::string EncodeRdmaFrame(const google::protobuf::MessageLite& message);
// Parses one whole frame; INVALID_ARGUMENT when it is short, long, or not the message.
absl::Status DecodeRdmaFrame(std::string_view frame, google::protobuf::MessageLite* message);

// ---------------------------------------------------------------------------------------------
// The write loop, over what it needs from verbs (a fake in tests).

class RdmaWritePath {
 public:
  virtual ~RdmaWritePath() = default;
  // Posts one signalled RDMA WRITE of `bytes` from local offset `offset` to the same offset of
  // the remote buffer.
  virtual absl::Status PostWrite(uint64_t wr_id, uint64_t offset, uint32_t bytes) = 0;
  struct Completion {
    uint64_t wr_id = 0;
    std::string error;  // "" for success, else the work completion's status
  };
  // Appends the completions there are now (does not wait).
  virtual absl::Status Poll(std::vector<Completion>* out) = 0;
};

struct RdmaWriteOptions {
  uint64_t buffer_bytes = 8 << 20;  // the registered buffer on both ends
  uint32_t write_bytes = 1 << 20;
  int window = 16;                  // writes outstanding at once
  std::chrono::milliseconds duration{5000};
  // A write that has not completed this long after the last completion fails the transfer
  // (the queue pair's own retries take ~0.5 s at timeout 14 x 7).
  std::chrono::milliseconds stall{2000};
};

// Keeps `window` writes outstanding until the duration ends, then waits for the outstanding ones.
// Fills bytes/writes/seconds/error of the result (bytes count completed writes only).
v1::LinkRdmaResult RunRdmaWrites(RdmaWritePath& path, const RdmaWriteOptions& options,
                                 const std::function<bool()>& cancelled);

// ---------------------------------------------------------------------------------------------
// The two ends of one half.

class RdmaQueuePair;  // the verbs objects (agentd/link_rdma_verbs.h)

class RdmaReceiveHalf {
 public:
  // Under `transport`: nullptr when RDMA is not wanted (tcp) or cannot run and `both` lets TCP
  // stand alone, with `info->error` saying why; FAILED_PRECONDITION naming the reason when
  // `rdma` was asked for and cannot run. Otherwise the opened half, `info` its identity.
  static absl::StatusOr<std::unique_ptr<RdmaReceiveHalf>> Open(LinkTransport transport, const FactsRoots& roots,
                                                               const std::string& interface, const std::string& ipv4,
                                                               v1::LinkRdmaQp* info);
  ~RdmaReceiveHalf();
  RdmaReceiveHalf(const RdmaReceiveHalf&) = delete;
  RdmaReceiveHalf& operator=(const RdmaReceiveHalf&) = delete;

  // Waits for the sender's control stream (with `token`), readies the queue pair, and waits for
  // the sender's report; gives up at `deadline` or when `cancelled()`. Reads the port counters
  // around it. Call once.
  v1::LinkRdmaResult Run(const std::string& token, std::chrono::steady_clock::time_point deadline,
                         const std::function<bool()>& cancelled);

 private:
  RdmaReceiveHalf() = default;
  FactsRoots roots_;
  RdmaPortChoice port_;
  std::unique_ptr<RdmaQueuePair> qp_;
  Fd listener_;  // the control stream's
};

// The receiver's side of one half's control stream on `listener` (RdmaReceiveHalf::Run; its own
// entry so that tests run it without a device): skips connections without `token`, reads the
// sender's LinkRdmaQp (or its reason for having none), calls `ready_to_receive` with it, answers,
// and returns the sender's final report; at `deadline` or on `cancelled()`, why it did not get one.
v1::LinkRdmaResult ServeRdmaControl(int listener, const std::string& token,
                                    std::chrono::steady_clock::time_point deadline,
                                    const std::function<bool()>& cancelled,
                                    const std::function<absl::Status(const v1::LinkRdmaQp&)>& ready_to_receive);

// The sending end of one half (target.rdma is the receiver's queue pair): opens the objects on
// the port of target.interface, exchanges over the control stream, writes for `options.duration`
// and reports. Every failure is in the result's error, naming the call.
v1::LinkRdmaResult RunRdmaSendHalf(const FactsRoots& roots, const v1::LinkTarget& target, const std::string& token,
                                   const RdmaWriteOptions& options, const std::function<bool()>& cancelled);

}  // namespace tandem::agentd
