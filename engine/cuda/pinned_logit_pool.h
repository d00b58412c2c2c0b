// Page-locked host buffers for the rows of Logits (engine/logit_storage.h): the device copies the
// step's logits straight into the buffer the returned Logits owns, and the buffer comes back here
// when that Logits dies, for a later step. A caller that keeps one step's Logits while the next runs
// makes the pool hold two buffers; it keeps at most kKeepFree idle ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "engine/logit_storage.h"

namespace tandem::engine::cuda {

class PinnedLogitPool final : public LogitMemoryPool {
 public:
  static constexpr size_t kKeepFree = 3;

  PinnedLogitPool() = default;
  ~PinnedLogitPool() override;
  PinnedLogitPool(const PinnedLogitPool&) = delete;
  PinnedLogitPool& operator=(const PinnedLogitPool&) = delete;

  // Makes sure the next Take of up to `bytes` finds an idle buffer without allocating: a CUDA error
  // (RESOURCE_EXHAUSTED when page-locked memory ran out) comes back here as a Status, where Take
  // could only throw.
  absl::Status Reserve(size_t bytes);

  // The smallest idle buffer of at least `bytes`, else a new one (std::bad_alloc when that fails).
  void* Take(size_t bytes) override;
  void Give(void* p, size_t bytes) noexcept override;

  // Buffers allocated and not yet freed (idle or lent); for tests.
  size_t buffers() const;

 private:
  // Under mu_: the index in idle_ of the smallest buffer of at least `bytes`, or -1.
  int64_t FindIdle(size_t bytes) const;

  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> capacity_;  // every live buffer (idle or lent) -> its bytes
  std::vector<void*> idle_;
};

}  // namespace tandem::engine::cuda
