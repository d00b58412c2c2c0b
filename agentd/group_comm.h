// The comm a loaded model holds. Model::Load binds a model to (rank, world, comm) before any
// group exists, but the agent loads first and joins later (and may join several generations
// with the same weights). So the model gets this stand-in, and JoinGroup attaches the group's
// real comm to it (Detach when the group is gone: collectives then fail, they never hang).
// It also counts lm_head gathers: every rank makes exactly one per step, which gives workers
// an iteration counter without touching the step loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/comm/comm.h"

namespace tandem::agentd {

class GroupComm final : public engine::Comm {
 public:
  GroupComm(int rank, int world) : rank_(rank), world_(world) {}

  // Attach/Detach only while no collective runs (before the group's threads start, after they end).
  void Attach(engine::Comm* inner) { inner_.store(inner); }
  void Detach() { inner_.store(nullptr); }
  uint64_t steps() const { return steps_.load(std::memory_order_relaxed); }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  absl::Status AllReduceSum(float* data, size_t n) override {
    engine::Comm* c = inner_.load();
    return c ? c->AllReduceSum(data, n) : NotInGroup();
  }
  absl::Status Broadcast(void* data, size_t nbytes, int root) override {
    engine::Comm* c = inner_.load();
    return c ? c->Broadcast(data, nbytes, root) : NotInGroup();
  }
  absl::Status Gather(const float* send, size_t n, float* recv, int root) override {
    steps_.fetch_add(1, std::memory_order_relaxed);
    engine::Comm* c = inner_.load();
    return c ? c->Gather(send, n, recv, root) : NotInGroup();
  }
  absl::Status Barrier() override {
    engine::Comm* c = inner_.load();
    return c ? c->Barrier() : NotInGroup();
  }
  void Abort(const std::string& reason) override {
    if (engine::Comm* c = inner_.load()) c->Abort(reason);
  }
  // Without a group there is nothing to talk to: StepDriver::Stop then sends nothing.
  bool aborted() const override {
    engine::Comm* c = inner_.load();
    return c ? c->aborted() : true;
  }
  std::string transport() const override {
    engine::Comm* c = inner_.load();
    return c ? c->transport() : "none";
  }

 private:
  static absl::Status NotInGroup() { return absl::FailedPreconditionError("this rank is not in a group"); }
  const int rank_, world_;
  std::atomic<engine::Comm*> inner_{nullptr};
  std::atomic<uint64_t> steps_{0};
};

}  // namespace tandem::agentd
