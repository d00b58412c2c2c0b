// How rank 0 makes every rank run the same step: it broadcasts each command (allocate the KV
// pool, run this StepBatch, stop) and then runs it itself; ranks > 0 sit in RunWorkerLoop and
// execute what they receive. With one rank (no comm) the driver just calls the model.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/comm/comm.h"
#include "engine/model.h"
#include "engine/step.h"

namespace tandem::engine {

class StepDriver {
 public:
  // `comm` may be null for a group of one. Neither is owned.
  StepDriver(Model* model, Comm* comm);
  ~StepDriver();  // sends Stop when it was not sent

  Model& model() { return *model_; }
  // The KV pool and, for a model with per-sequence state, its state slots (Model::AllocateKvCache).
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size, int32_t num_state_slots);
  int32_t num_kv_blocks() const { return num_blocks_; }
  int32_t num_state_slots() const { return num_state_slots_; }
  int32_t kv_block_size() const { return block_size_; }
  // Runs `batch` on every rank; rank 0's logits come back.
  absl::StatusOr<Logits> Forward(const StepBatch& batch);
  // Releases the workers from RunWorkerLoop (once).
  absl::Status Stop();
  // A no-op command, sent by an idle rank 0 (about every second): the workers, waiting for the
  // next command under the collective deadline, would otherwise time out on an idle group, and
  // a dead peer is noticed by the failing heartbeat instead of by the next request.
  absl::Status Heartbeat();

 private:
  absl::Status Send(uint32_t kind, uint64_t a, uint64_t b, const std::string* payload, uint32_t c = 0);

  Model* model_;
  Comm* comm_;
  int32_t num_blocks_ = 0, block_size_ = 0, num_state_slots_ = 0;
  bool stopped_ = false;
};

// Ranks > 0: executes rank 0's commands until Stop (OK) or a failure (the comm's error, e.g. a
// deadline or a lost peer).
absl::Status RunWorkerLoop(Model& model, Comm& comm);

}  // namespace tandem::engine
