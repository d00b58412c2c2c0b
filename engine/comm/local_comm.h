// The comm of a group of one (TP=1): collectives are identities; Abort still fails later calls.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "engine/comm/comm.h"

namespace tandem::engine {

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(float* data, size_t n) override;
  absl::Status Broadcast(void* data, size_t nbytes, int root) override;
  absl::Status Gather(const float* send, size_t n, float* recv, int root) override;
  absl::Status Barrier() override;
  void Abort(const std::string& reason) override;
  bool aborted() const override { return aborted_.load(); }
  std::string transport() const override { return "local"; }

 private:
  absl::Status Check(int root) const;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;
  std::string reason_;
};

}  // namespace tandem::engine
