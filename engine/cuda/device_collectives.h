// The collectives a tensor-parallel cuda model needs, on DEVICE buffers and ordered on the model's
// stream. Two implementations, chosen from the Comm the model is given (MakeDeviceCollectives):
//   - NCCL (engine/cuda/nccl_comm.h): the NcclComm itself implements this interface. Collectives
//     are enqueued on the model's stream without waiting, so they can be captured into the decode
//     step's CUDA graph; Wait() polls the stream with the comm's deadline and aborts the comm when
//     it passes (a dead peer cannot hang the step).
//   - Host-staged, over any engine Comm (Gloo, LocalComm; ranks as threads on one GPU in tests):
//     synchronize the stream, copy to the host, the Comm's collective, copy back. Not capturable:
//     a model with these runs every step without graphs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "engine/comm/comm.h"

namespace tandem::engine::cuda {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // In-place sum over all ranks of the `n` floats at `dev`, after the work already on `stream`.
  virtual absl::Status AllReduceSum(float* dev, size_t n, cudaStream_t stream) = 0;
  // recv (world, n) on `root` = every rank's `send` (n) in rank order; other ranks' `recv` may be
  // written too (NCCL gathers to all). Both device buffers.
  virtual absl::Status GatherTo(const float* send, size_t n, float* recv, int root, cudaStream_t stream) = 0;
  // True when the two calls above only enqueue work on `stream` (legal inside stream capture).
  virtual bool capturable() const = 0;
  // Waits until `stream` (collectives included) completes; the comm's deadline applies.
  virtual absl::Status Wait(cudaStream_t stream) = 0;
};

// The NCCL comm's own device collectives when `comm` is one (not owned, valid while comm lives),
// else host-staged ones over `comm` (owned). `owned` receives the latter.
DeviceCollectives* MakeDeviceCollectives(Comm* comm, std::unique_ptr<DeviceCollectives>* owned);

}  // namespace tandem::engine::cuda
