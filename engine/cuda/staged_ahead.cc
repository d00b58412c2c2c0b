#include "engine/cuda/staged_ahead.h"

#include "common/status.h"

namespace tandem::engine::cuda {

absl::StatusOr<std::unique_ptr<StagedAhead>> StagedAhead::Create(int64_t layers) {
  std::unique_ptr<StagedAhead> s(new StagedAhead());
  RETURN_IF_ERROR(s->counters_.Allocate(layers));
  RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&s->side_, cudaStreamNonBlocking), "staged ahead stream"));
  RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&s->fork_, cudaEventDisableTiming), "staged ahead event"));
  RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&s->join_, cudaEventDisableTiming), "staged ahead event"));
  return s;
}

StagedAhead::~StagedAhead() {
  if (join_ != nullptr) cudaEventDestroy(join_);
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (side_ != nullptr) cudaStreamDestroy(side_);
}

absl::Status StagedAhead::Reset(cudaStream_t stream) {
  return CudaStatus(cudaMemsetAsync(counters_.get(), 0, counters_.size() * sizeof(uint32_t), stream),
                    "staged ahead counters");
}

}  // namespace tandem::engine::cuda
