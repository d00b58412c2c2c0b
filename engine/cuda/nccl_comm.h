// The NCCL implementation of Comm (GPU tensor parallelism). One rank per GPU; rank 0 creates the
// NCCL unique id and publishes it in the rendezvous Store, the others read it.
//
// Buffers: collectives take device pointers (the model's all-reduces) or host pointers (the step
// driver's broadcasts of the step plan); host buffers are staged through a device buffer.
// Deadlines: the communicator is created non-blocking (ncclConfig_t.blocking = 0); each collective
// is enqueued on the comm's stream and then polled (cudaStreamQuery + ncclCommGetAsyncError) until
// it completes, fails, or `timeout` passes, in which case ncclCommAbort is called and the call
// returns DeadlineExceeded. Abort() from another thread makes the poll return Aborted at once.
//
// The comm returned is also a cuda::DeviceCollectives (device_collectives.h; CudaModel finds it
// by dynamic_cast): the model's all-reduces and its logits gather are enqueued on the MODEL's
// stream without polling (so a decode step's graph captures them), and DeviceCollectives::Wait
// polls that stream with the same deadline and abort at the end of the step. The Comm methods
// above (the step driver's broadcasts of host buffers) keep their own stream and polling.
// The calling thread must have this comm's device current (CreateNcclComm sets it).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/comm/comm.h"
#include "engine/comm/store.h"

namespace tandem::engine::cuda {

struct NcclCommOptions {
  int rank = 0;
  int world_size = 1;
  int device = 0;                              // CUDA device of this rank
  Store* store = nullptr;                      // rendezvous (not owned); key "nccl_unique_id"
  std::chrono::milliseconds timeout{30000};    // each collective
  std::chrono::milliseconds connect_timeout{60000};
};

// Creates this rank's communicator; blocks until every rank joined or connect_timeout passed.
absl::StatusOr<std::unique_ptr<Comm>> CreateNcclComm(const NcclCommOptions& options);

}  // namespace tandem::engine::cuda
