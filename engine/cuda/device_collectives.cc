#include "engine/cuda/device_collectives.h"

#include <string>

#include "common/status.h"

namespace tandem::engine::cuda {

namespace {

absl::Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string("host-staged collective: ") + what + ": " + cudaGetErrorString(err));
}

// Pinned host memory, grown on demand (reused by every collective of the model: each collective
// synchronizes the stream first, so an earlier upload from it has finished).
class PinnedBuffer {
 public:
  ~PinnedBuffer() {
    if (p_ != nullptr) cudaFreeHost(p_);
  }
  absl::StatusOr<float*> Get(size_t n) {
    if (n > n_) {
      if (p_ != nullptr) cudaFreeHost(p_);
      p_ = nullptr;
      n_ = 0;
      RETURN_IF_ERROR(Check(cudaMallocHost(&p_, n * sizeof(float)), "cudaMallocHost"));
      n_ = n;
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  size_t n_ = 0;
};

class HostStagedCollectives final : public DeviceCollectives {
 public:
  explicit HostStagedCollectives(Comm* comm) : comm_(comm) {}

  absl::Status AllReduceSum(float* dev, size_t n, cudaStream_t stream) override {
    ASSIGN_OR_RETURN(float* h, send_.Get(n));
    RETURN_IF_ERROR(Check(cudaMemcpyAsync(h, dev, n * sizeof(float), cudaMemcpyDeviceToHost, stream), "copy out"));
    RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream), "synchronize"));
    RETURN_IF_ERROR(comm_->AllReduceSum(h, n));
    // Asynchronous: the next collective synchronizes the stream before it rewrites `h`.
    return Check(cudaMemcpyAsync(dev, h, n * sizeof(float), cudaMemcpyHostToDevice, stream), "copy back");
  }

  absl::Status GatherTo(const float* send, size_t n, float* recv, int root, cudaStream_t stream) override {
    ASSIGN_OR_RETURN(float* h, send_.Get(n));
    RETURN_IF_ERROR(Check(cudaMemcpyAsync(h, send, n * sizeof(float), cudaMemcpyDeviceToHost, stream), "copy out"));
    RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream), "synchronize"));
    float* all = nullptr;
    if (comm_->rank() == root) {
      ASSIGN_OR_RETURN(all, recv_.Get(n * comm_->world_size()));
    }
    RETURN_IF_ERROR(comm_->Gather(h, n, all, root));
    if (all == nullptr) return absl::OkStatus();
    return Check(cudaMemcpyAsync(recv, all, n * comm_->world_size() * sizeof(float), cudaMemcpyHostToDevice, stream),
                 "copy back");
  }

  bool capturable() const override { return false; }

  absl::Status Wait(cudaStream_t stream) override {
    if (comm_->aborted()) return absl::AbortedError("comm aborted");
    return Check(cudaStreamSynchronize(stream), "synchronize");
  }

 private:
  Comm* comm_;
  PinnedBuffer send_, recv_;
};

}  // namespace

DeviceCollectives* MakeDeviceCollectives(Comm* comm, std::unique_ptr<DeviceCollectives>* owned) {
  // Explicit: an NcclComm is itself a DeviceCollectives (nccl_comm.cc); any other Comm is staged.
  if (auto* d = dynamic_cast<DeviceCollectives*>(comm)) return d;
  *owned = std::make_unique<HostStagedCollectives>(comm);
  return owned->get();
}

}  // namespace tandem::engine::cuda
