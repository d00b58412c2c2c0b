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

// A cuda rank's model does its collectives on device buffers through cuda::DeviceCollectives,
// which it finds by dynamic_cast on the comm it was loaded with: this stand-in. So the stand-in
// is one too and forwards to the attached comm's (the group's NcclComm; agent cuda groups are
// always NCCL, agentd/group_transport.h). Only the header is used (no link dependency).
#if defined(TANDEM_HAVE_CUDA) && __has_include("engine/cuda/device_collectives.h")
#define TANDEM_GROUP_COMM_DEVICE 1
#include "engine/cuda/device_collectives.h"
#endif

namespace tandem::agentd {

class GroupComm final : public engine::Comm
#ifdef TANDEM_GROUP_COMM_DEVICE
    , public engine::cuda::DeviceCollectives
#endif
{
 public:
  GroupComm(int rank, int world) : rank_(rank), world_(world) {}

  // Attach/Detach only while no collective runs (before the group's threads start, after they end).
  // `device_of`: the comm whose device collectives to use when `inner` wraps it (the head's
  // TimedComm around the NcclComm); null = `inner` itself.
  void Attach(engine::Comm* inner, engine::Comm* device_of = nullptr) {
#ifdef TANDEM_GROUP_COMM_DEVICE
    device_ = dynamic_cast<engine::cuda::DeviceCollectives*>(device_of != nullptr ? device_of : inner);
#endif
    (void)device_of;
    inner_.store(inner);
  }
  void Detach() {
    inner_.store(nullptr);
#ifdef TANDEM_GROUP_COMM_DEVICE
    device_ = nullptr;
#endif
  }
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

#ifdef TANDEM_GROUP_COMM_DEVICE
  // DeviceCollectives: `device_` changes only in Attach/Detach (no collective runs then).
  absl::Status AllReduceSum(float* dev, size_t n, cudaStream_t stream) override {
    return device_ ? device_->AllReduceSum(dev, n, stream) : NoDevice();
  }
  absl::Status GatherTo(const float* send, size_t n, float* recv, int root, cudaStream_t stream) override {
    steps_.fetch_add(1, std::memory_order_relaxed);  // the device path's one gather per step
    return device_ ? device_->GatherTo(send, n, recv, root, stream) : NoDevice();
  }
  // Never: a captured graph would keep the NCCL communicator of the group it was captured in,
  // and this stand-in outlives groups (a rejoin attaches a new communicator). Until the model
  // can drop its graphs when the comm changes, agent-hosted TP ranks run decode without graphs.
  bool capturable() const override { return false; }
  absl::Status Wait(cudaStream_t stream) override { return device_ ? device_->Wait(stream) : NoDevice(); }
#endif

 private:
  static absl::Status NotInGroup() { return absl::FailedPreconditionError("this rank is not in a group"); }
  const int rank_, world_;
  std::atomic<engine::Comm*> inner_{nullptr};
  std::atomic<uint64_t> steps_{0};
#ifdef TANDEM_GROUP_COMM_DEVICE
  engine::cuda::DeviceCollectives* device_ = nullptr;  // inner_ as device collectives (NCCL), or null
  absl::Status NoDevice() const {
    return inner_.load() ? absl::FailedPreconditionError("the group's comm (" + inner_.load()->transport() +
                                                         ") has no device collectives: cuda ranks need NCCL")
                         : NotInGroup();
  }
#endif
};

}  // namespace tandem::agentd
