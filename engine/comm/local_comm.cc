#include "engine/comm/local_comm.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::engine {

absl::Status LocalComm::Check(int root) const {
  if (aborted_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    return absl::FailedPreconditionError(absl::StrCat("comm aborted: ", reason_));
  }
  if (root != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("root ", root, " out of range for world size 1"));
  }
  return absl::OkStatus();
}

absl::Status LocalComm::AllReduceSum(float*, size_t) { return Check(0); }

absl::Status LocalComm::Broadcast(void*, size_t, int root) { return Check(root); }

absl::Status LocalComm::Gather(const float* send, size_t n, float* recv, int root) {
  absl::Status st = Check(root);
  if (!st.ok()) return st;
  if (n > 0 && recv == nullptr)
    return absl::InvalidArgumentError("gather: recv is null on the root");
  if (n > 0 && recv != send) std::memmove(recv, send, n * sizeof(float));
  return absl::OkStatus();
}

absl::Status LocalComm::Barrier() { return Check(0); }

void LocalComm::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.load()) return;
  reason_ = reason;
  aborted_.store(true);
}

}  // namespace tandem::engine
