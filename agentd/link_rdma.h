// The RDMA side of `tandemctl linktest`: which RDMA devices this host has, through libibverbs
// when the build found it (TANDEM_HAVE_IBVERBS). The timed RDMA WRITE transfer is not built yet:
// the TCP transfer (agentd/link_transfer.h) is the measurement, and this line tells the operator
// what the RDMA side saw ("rdma: no devices", ...). docs/linktest.md says the same.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::agentd {

// The names of the RDMA devices libibverbs lists (empty: none). UNIMPLEMENTED when the agent
// was built without libibverbs.
absl::StatusOr<std::vector<std::string>> ListRdmaDevices();

// The one-line report for LinkSendResponse.rdma, from what ListRdmaDevices returned.
std::string DescribeRdma(const absl::StatusOr<std::vector<std::string>>& devices);
inline std::string DescribeRdma() { return DescribeRdma(ListRdmaDevices()); }

}  // namespace tandem::agentd
