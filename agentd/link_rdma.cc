#include "agentd/link_rdma.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#ifdef TANDEM_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace tandem::agentd {

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
  return absl::StrCat("rdma: devices ", absl::StrJoin(*devices, ", "),
                      "; the RDMA WRITE transfer is not implemented yet, the TCP result stands alone");
}

}  // namespace tandem::agentd
