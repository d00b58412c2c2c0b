// The libibverbs objects of one RDMA WRITE half (agentd/link_rdma.h), each released on every
// path: device context, protection domain, a page-aligned buffer registered for remote writes,
// one completion queue and one RC queue pair. Built as "not built in" errors without libibverbs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "agentd/link_rdma.h"

namespace tandem::agentd {

class RdmaQueuePair final : public RdmaWritePath {
 public:
  // Opens `port.device`, checks the port is active, and creates the objects; the queue pair is
  // left in INIT. Each failure names the verbs call and its errno.
  static absl::StatusOr<std::unique_ptr<RdmaQueuePair>> Open(const RdmaPortChoice& port, uint64_t buffer_bytes,
                                                             int window);
  ~RdmaQueuePair() override;
  RdmaQueuePair(const RdmaQueuePair&) = delete;
  RdmaQueuePair& operator=(const RdmaQueuePair&) = delete;

  // This end's identity for the other end (qp_num, psn, gid, gid_index, rkey, addr, len, mtu).
  v1::LinkRdmaQp Info() const;
  // INIT -> RTR towards `remote` (the path MTU is the smaller of the two ends'); RTR -> RTS.
  absl::Status ReadyToReceive(const v1::LinkRdmaQp& remote);
  absl::Status ReadyToSend();

  absl::Status PostWrite(uint64_t wr_id, uint64_t offset, uint32_t bytes) override;
  absl::Status Poll(std::vector<Completion>* out) override;

 private:
  struct Objects;
  explicit RdmaQueuePair(std::unique_ptr<Objects> o);
  std::unique_ptr<Objects> o_;
};

}  // namespace tandem::agentd
