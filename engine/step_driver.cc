#include "engine/step_driver.h"

#include <cstring>

#include "common/log.h"
#include "common/status.h"

namespace tandem::engine {

namespace {

enum Command : uint32_t { kAllocateKv = 1, kStep = 2, kStop = 3, kHeartbeat = 4 };

// The fixed-size message broadcast first. A step's serialized batch (a = its size) rides inside
// it when it fits (every decode step of a few sequences), else follows in a second broadcast:
// at batch 1 each collective costs latency, so one fewer per step matters.
constexpr size_t kInlineBytes = 232;
struct CommandHeader {
  uint32_t kind = 0;
  uint32_t c = 0;  // kAllocateKv: the number of state slots
  uint64_t a = 0;
  uint64_t b = 0;
  char inline_payload[kInlineBytes] = {};
};
static_assert(sizeof(CommandHeader) == 256);

}  // namespace

StepDriver::StepDriver(Model* model, Comm* comm) : model_(model), comm_(comm) {
  if (comm_ != nullptr && comm_->world_size() == 1) comm_ = nullptr;
}

StepDriver::~StepDriver() {
  if (!stopped_) {
    absl::Status st = Stop();
    if (!st.ok()) TLOG(WARN) << "stopping the workers: " << st.message();
  }
}

absl::Status StepDriver::Send(uint32_t kind, uint64_t a, uint64_t b, const std::string* payload, uint32_t c) {
  if (comm_ == nullptr) return absl::OkStatus();
  CommandHeader h;
  h.kind = kind;
  h.a = a;
  h.b = b;
  h.c = c;
  const bool inline_payload = payload != nullptr && payload->size() <= kInlineBytes;
  if (inline_payload) std::memcpy(h.inline_payload, payload->data(), payload->size());
  RETURN_IF_ERROR(comm_->Broadcast(&h, sizeof(h), 0));
  if (payload != nullptr && !inline_payload) {
    RETURN_IF_ERROR(comm_->Broadcast(const_cast<char*>(payload->data()), payload->size(), 0));
  }
  return absl::OkStatus();
}

absl::Status StepDriver::AllocateKvCache(int32_t num_blocks, int32_t block_size, int32_t num_state_slots) {
  if (num_state_slots < 0) return absl::InvalidArgumentError("negative number of state slots");
  RETURN_IF_ERROR(Send(kAllocateKv, num_blocks, block_size, nullptr, static_cast<uint32_t>(num_state_slots)));
  RETURN_IF_ERROR(model_->AllocateKvCache(num_blocks, block_size, num_state_slots));
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  num_state_slots_ = num_state_slots;
  return absl::OkStatus();
}

absl::StatusOr<Logits> StepDriver::Forward(const StepBatch& batch) {
  if (comm_ != nullptr) {
    const std::string bytes = batch.Serialize();
    RETURN_IF_ERROR(Send(kStep, bytes.size(), 0, &bytes));
  }
  return model_->Forward(batch);
}

absl::Status StepDriver::Stop() {
  if (stopped_) return absl::OkStatus();
  stopped_ = true;
  if (comm_ == nullptr || comm_->aborted()) return absl::OkStatus();
  return Send(kStop, 0, 0, nullptr);
}

absl::Status StepDriver::Heartbeat() {
  if (stopped_ || comm_ == nullptr) return absl::OkStatus();
  return Send(kHeartbeat, 0, 0, nullptr);
}

absl::Status RunWorkerLoop(Model& model, Comm& comm) {
  for (;;) {
    CommandHeader h;
    RETURN_IF_ERROR(comm.Broadcast(&h, sizeof(h), 0));
    switch (h.kind) {
      case kStop:
        return absl::OkStatus();
      case kHeartbeat:
        break;
      case kAllocateKv:
        RETURN_IF_ERROR(model.AllocateKvCache(static_cast<int32_t>(h.a), static_cast<int32_t>(h.b),
                                              static_cast<int32_t>(h.c)));
        break;
      case kStep: {
        if (h.a > (1ull << 32)) return absl::InvalidArgumentError("step plan of " + std::to_string(h.a) + " bytes");
        std::string bytes(h.a, '\0');
        if (h.a <= kInlineBytes) {
          std::memcpy(bytes.data(), h.inline_payload, h.a);
        } else {
          RETURN_IF_ERROR(comm.Broadcast(bytes.data(), bytes.size(), 0));
        }
        ASSIGN_OR_RETURN(StepBatch batch, StepBatch::Deserialize(bytes));
        ASSIGN_OR_RETURN(Logits ignored, model.Forward(batch));
        (void)ignored;
        break;
      }
      default:
        return absl::InvalidArgumentError("worker: unknown command " + std::to_string(h.kind) + " from rank 0");
    }
  }
}

}  // namespace tandem::engine
