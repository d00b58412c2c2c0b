#include "engine/cuda/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/status.h"
#include "engine/cuda/device_collectives.h"

namespace tandem::engine::cuda {

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kIdKey[] = "nccl_unique_id";

std::string NcclText(ncclResult_t r) { return ncclGetErrorString(r); }

bool IsDevicePointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer is not an error worth keeping
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

// Also the model's DeviceCollectives (device_collectives.h): those enqueue on the caller's stream.
class NcclComm final : public Comm, public DeviceCollectives {
 public:
  NcclComm(const NcclCommOptions& o, ncclComm_t comm, cudaStream_t stream)
      : o_(o), comm_(comm), stream_(stream) {}
  ~NcclComm() override {
    if (comm_ != nullptr) {
      if (aborted_) {
        ncclCommAbort(comm_);
      } else {
        ncclCommFinalize(comm_);
        Poll("finalize").IgnoreError();
        ncclCommDestroy(comm_);
      }
    }
    if (staging_ != nullptr) cudaFree(staging_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return o_.rank; }
  int world_size() const override { return o_.world_size; }
  std::string transport() const override { return "nccl"; }
  bool aborted() const override { return aborted_; }

  void Abort(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_.exchange(true)) return;
    abort_reason_ = reason;
    // The polling thread sees aborted_ and returns; ncclCommAbort also unblocks kernels in flight.
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  absl::Status AllReduceSum(float* data, size_t n) override {
    return Run("all-reduce", data, n * sizeof(float), true, [&](void* buf) {
      return ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm_, stream_);
    });
  }

  absl::Status Broadcast(void* data, size_t nbytes, int root) override {
    return Run("broadcast", data, nbytes, true, [&](void* buf) {
      return ncclBroadcast(buf, buf, nbytes, ncclUint8, root, comm_, stream_);
    });
  }

  absl::Status Gather(const float* send, size_t n, float* recv, int root) override {
    // NCCL has no gather: an all-gather into a (world, n) buffer, of which root keeps all.
    const size_t bytes = n * sizeof(float);
    const bool dev = IsDevicePointer(send);
    float* all = nullptr;
    if (cudaMalloc(&all, bytes * o_.world_size) != cudaSuccess) return absl::ResourceExhaustedError("gather buffer");
    float* src = const_cast<float*>(send);
    if (!dev) {
      if (cudaMalloc(&src, bytes) != cudaSuccess) return absl::ResourceExhaustedError("gather buffer");
      cudaMemcpy(src, send, bytes, cudaMemcpyHostToDevice);
    }
    absl::Status st = Enqueue("gather", [&] { return ncclAllGather(src, all, n, ncclFloat32, comm_, stream_); });
    if (st.ok() && o_.rank == root && recv != nullptr) {
      st = ToStatus(cudaMemcpy(recv, all, bytes * o_.world_size, cudaMemcpyDefault), "gather copy");
    }
    if (!dev) cudaFree(src);
    cudaFree(all);
    return st;
  }

  absl::Status Barrier() override {
    float one = 1.0f;
    return AllReduceSum(&one, 1);
  }

  // DeviceCollectives: enqueue on the model's stream and return (no stream query, so these are
  // legal inside stream capture); the model calls Wait where it synchronizes the step.
  absl::Status AllReduceSum(float* dev, size_t n, cudaStream_t stream) override {
    return EnqueueOnly("all-reduce", [&] { return ncclAllReduce(dev, dev, n, ncclFloat32, ncclSum, comm_, stream); });
  }
  absl::Status GatherTo(const float* send, size_t n, float* recv, int root, cudaStream_t stream) override {
    // NCCL has no gather: every rank receives the (world, n) buffer.
    return EnqueueOnly("all-gather", [&] { return ncclAllGather(send, recv, n, ncclFloat32, comm_, stream); });
  }
  bool capturable() const override { return true; }
  absl::Status Wait(cudaStream_t stream) override { return Poll("step", stream); }

 private:
  static absl::Status ToStatus(cudaError_t e, const std::string& what) {
    return e == cudaSuccess ? absl::OkStatus() : absl::InternalError(what + ": " + cudaGetErrorString(e));
  }

  absl::Status Dead() const {
    return absl::AbortedError("nccl comm aborted: " + abort_reason_);
  }

  // Enqueues one collective on stream_ and polls it to completion or deadline.
  template <typename F>
  absl::Status Enqueue(const char* what, F&& collective) {
    if (aborted_) return Dead();
    ncclResult_t r = collective();
    if (r != ncclSuccess && r != ncclInProgress) return absl::InternalError(std::string("nccl ") + what + ": " + NcclText(r));
    return Poll(what);
  }

  // Enqueues one collective without waiting for it. A non-blocking communicator may answer
  // ncclInProgress (e.g. while it connects lazily to its peers): wait for the host-side state
  // to settle, with the deadline, before the next NCCL call.
  template <typename F>
  absl::Status EnqueueOnly(const char* what, F&& collective) {
    if (aborted_) return Dead();
    ncclResult_t r = collective();
    if (r == ncclSuccess) return absl::OkStatus();
    if (r != ncclInProgress) return absl::InternalError(std::string("nccl ") + what + ": " + NcclText(r));
    const auto deadline = Clock::now() + o_.timeout;
    while (true) {
      if (aborted_) return Dead();
      ncclResult_t async = ncclInProgress;
      ncclCommGetAsyncError(comm_, &async);
      if (async == ncclSuccess) return absl::OkStatus();
      if (async != ncclInProgress) {
        Abort(std::string("nccl ") + what + " failed: " + NcclText(async));
        return absl::UnavailableError(std::string("nccl ") + what + ": " + NcclText(async));
      }
      if (Clock::now() > deadline) {
        Abort(std::string("nccl ") + what + " was not enqueued within " + std::to_string(o_.timeout.count()) + " ms");
        return absl::DeadlineExceededError(abort_reason_);
      }
      std::this_thread::yield();
    }
  }

  absl::Status Poll(const char* what) { return Poll(what, stream_); }
  // Polls `stream` (collectives of this comm on it) to completion, failure or the deadline.
  absl::Status Poll(const char* what, cudaStream_t stream) {
    const auto deadline = Clock::now() + o_.timeout;
    while (true) {
      if (aborted_) return Dead();
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        Abort(std::string("nccl ") + what + " failed: " + NcclText(async));
        return absl::UnavailableError(std::string("nccl ") + what + ": " + NcclText(async));
      }
      if (async == ncclSuccess) {
        const cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return absl::OkStatus();
        if (q != cudaErrorNotReady) return ToStatus(q, std::string("nccl ") + what);
      }
      if (Clock::now() > deadline) {
        Abort(std::string("nccl ") + what + " did not complete within " + std::to_string(o_.timeout.count()) + " ms");
        return absl::DeadlineExceededError(abort_reason_);
      }
      std::this_thread::yield();
    }
  }

  // Runs a collective on `data` in place, staging host buffers through the device.
  template <typename F>
  absl::Status Run(const char* what, void* data, size_t nbytes, bool copy_back, F&& collective) {
    if (aborted_) return Dead();
    if (IsDevicePointer(data)) return Enqueue(what, [&] { return collective(data); });
    if (staging_bytes_ < nbytes) {
      if (staging_ != nullptr) cudaFree(staging_);
      staging_ = nullptr;
      RETURN_IF_ERROR(ToStatus(cudaMalloc(&staging_, nbytes), "nccl staging buffer"));
      staging_bytes_ = nbytes;
    }
    RETURN_IF_ERROR(ToStatus(cudaMemcpy(staging_, data, nbytes, cudaMemcpyHostToDevice), "nccl staging"));
    RETURN_IF_ERROR(Enqueue(what, [&] { return collective(staging_); }));
    if (copy_back) RETURN_IF_ERROR(ToStatus(cudaMemcpy(data, staging_, nbytes, cudaMemcpyDeviceToHost), "nccl staging"));
    return absl::OkStatus();
  }

  NcclCommOptions o_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  std::atomic<bool> aborted_{false};
  std::mutex abort_mu_;
  std::string abort_reason_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Comm>> CreateNcclComm(const NcclCommOptions& o) {
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError("nccl: rank " + std::to_string(o.rank) + " outside a group of " +
                                      std::to_string(o.world_size));
  }
  if (o.store == nullptr && o.world_size > 1) return absl::InvalidArgumentError("nccl: a store is required");
  if (cudaSetDevice(o.device) != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError("nccl: cannot use CUDA device " + std::to_string(o.device));
  }
  ncclUniqueId id;
  if (o.rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return absl::UnavailableError("ncclGetUniqueId: " + NcclText(r));
    if (o.store != nullptr) {
      RETURN_IF_ERROR(o.store->Set(kIdKey, std::string(reinterpret_cast<const char*>(&id), sizeof id)));
    }
  } else {
    ASSIGN_OR_RETURN(std::string v, o.store->Get(kIdKey, o.connect_timeout));
    if (v.size() != sizeof id) return absl::DataLossError("nccl unique id in the store has the wrong size");
    std::memcpy(&id, v.data(), sizeof id);
  }
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return absl::InternalError("nccl: cannot create a stream");
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and collectives return at once; we poll with a deadline
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, o.world_size, id, o.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    cudaStreamDestroy(stream);
    return absl::UnavailableError("ncclCommInitRankConfig: " + NcclText(r));
  }
  const auto deadline = Clock::now() + o.connect_timeout;
  while (true) {
    ncclResult_t state = ncclInProgress;
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress || Clock::now() > deadline) {
      ncclCommAbort(comm);
      cudaStreamDestroy(stream);
      if (state != ncclInProgress) return absl::UnavailableError("nccl init: " + NcclText(state));
      return absl::DeadlineExceededError("nccl init: not every rank joined within " +
                                         std::to_string(o.connect_timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<Comm>(std::make_unique<NcclComm>(o, comm, stream));
}

}  // namespace tandem::engine::cuda
