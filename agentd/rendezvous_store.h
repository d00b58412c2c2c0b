// The head agent's rendezvous store: an in-memory key-value map that AgentControl.StoreSet /
// StoreGet expose to the other ranks (Gloo's addresses, later NCCL's unique id, the group's
// generation). Readers block on a condition variable until the key appears or their deadline
// passes. It is bounded (keys and bytes) because any token holder can write to it, and keys
// of older generations are dropped when a new group forms.
//
// CancellableStore wraps any Store so that a rendezvous in progress can be called off (a
// LeaveGroup while JoinGroup waits): long Gets are cut into short slices that check a flag.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "engine/comm/store.h"

namespace tandem::agentd {

class RendezvousStore final : public engine::Store {
 public:
  explicit RendezvousStore(size_t max_keys = 4096, size_t max_bytes = 16u << 20);

  // ResourceExhausted when the store would pass its bounds.
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::string Describe() const override { return "the head agent's store"; }

  // The value now, without waiting (nullopt when absent).
  std::optional<std::string> TryGet(const std::string& key);
  // Drops every key under "gen<g>/" with g < generation (groups that no longer exist).
  void DropGenerationsBefore(uint64_t generation);
  // Drops every key that starts with `prefix` (a finished fabric check's "fabric/<id>/").
  void DropPrefix(const std::string& prefix);
  size_t size() const;

 private:
  const size_t max_keys_, max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
  size_t bytes_ = 0;
};

class CancellableStore final : public engine::Store {
 public:
  explicit CancellableStore(engine::Store& base,
                            std::chrono::milliseconds slice = std::chrono::milliseconds(250))
      : base_(base), slice_(slice) {}

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::string Describe() const override { return base_.Describe(); }

  // Every Get in progress returns Cancelled within one slice; later calls at once.
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  engine::Store& base_;
  const std::chrono::milliseconds slice_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace tandem::agentd
