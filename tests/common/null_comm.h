// A Comm that talks to nobody: it only says which rank of which world it is, and every collective
// succeeds at once leaving the data as it was. For code that needs a rank and a world without
// peers (a backend's load checks), or a transport that must be caught not summing (the fabric
// check's result check).
#pragma once

#include <string>
#include <utility>

#include "engine/comm/comm.h"

namespace tandem::testing {

class NullComm final : public engine::Comm {
 public:
  NullComm(int rank, int world, std::string transport = "null")
      : rank_(rank), world_(world), transport_(std::move(transport)) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  absl::Status AllReduceSum(float*, size_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
  absl::Status Gather(const float*, size_t, float*, int) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
  void Abort(const std::string&) override {}
  bool aborted() const override { return false; }
  std::string transport() const override { return transport_; }

 private:
  int rank_, world_;
  std::string transport_;
};

}  // namespace tandem::testing
