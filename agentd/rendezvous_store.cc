#include "agentd/rendezvous_store.h"

#include <algorithm>
#include <cstdlib>

namespace tandem::agentd {

using Clock = std::chrono::steady_clock;

RendezvousStore::RendezvousStore(size_t max_keys, size_t max_bytes) : max_keys_(max_keys), max_bytes_(max_bytes) {}

absl::Status RendezvousStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = values_.find(key);
    const size_t old_bytes = it == values_.end() ? 0 : key.size() + it->second.size();
    const size_t new_bytes = bytes_ - old_bytes + key.size() + value.size();
    if (it == values_.end() && values_.size() >= max_keys_) {
      return absl::ResourceExhaustedError("the rendezvous store is full (" + std::to_string(max_keys_) + " keys)");
    }
    if (new_bytes > max_bytes_) {
      return absl::ResourceExhaustedError("the rendezvous store is full (" + std::to_string(max_bytes_) + " bytes)");
    }
    values_[key] = value;
    bytes_ = new_bytes;
  }
  cv_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_for(l, timeout, [&] { return values_.count(key) > 0; })) {
    return absl::DeadlineExceededError("rendezvous key '" + key + "' did not appear in " + Describe() + " within " +
                                       std::to_string(timeout.count()) + " ms");
  }
  return values_[key];
}

std::optional<std::string> RendezvousStore::TryGet(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void RendezvousStore::DropGenerationsBefore(uint64_t generation) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = values_.begin(); it != values_.end();) {
    const std::string& k = it->first;
    bool drop = false;
    if (k.rfind("gen", 0) == 0) {
      const size_t slash = k.find('/');
      char* end = nullptr;
      const std::string digits = k.substr(3, slash == std::string::npos ? std::string::npos : slash - 3);
      const unsigned long long g = std::strtoull(digits.c_str(), &end, 10);
      drop = !digits.empty() && *end == '\0' && g < generation;
    }
    if (drop) {
      bytes_ -= k.size() + it->second.size();
      it = values_.erase(it);
    } else {
      ++it;
    }
  }
}

void RendezvousStore::DropPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = values_.lower_bound(prefix); it != values_.end() && it->first.rfind(prefix, 0) == 0;) {
    bytes_ -= it->first.size() + it->second.size();
    it = values_.erase(it);
  }
}

size_t RendezvousStore::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return values_.size();
}

absl::Status CancellableStore::Set(const std::string& key, const std::string& value) {
  if (cancelled()) return absl::CancelledError("the rendezvous was called off (leaving the group)");
  return base_.Set(key, value);
}

absl::StatusOr<std::string> CancellableStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (cancelled()) return absl::CancelledError("the rendezvous was called off (leaving the group)");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const auto slice = std::max(std::chrono::milliseconds(0), std::min(left, slice_));
    absl::StatusOr<std::string> v = base_.Get(key, slice);
    if (v.ok() || !absl::IsDeadlineExceeded(v.status())) return v;
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError("rendezvous key '" + key + "' did not appear in " + Describe() +
                                         " within " + std::to_string(timeout.count()) + " ms");
    }
  }
}

}  // namespace tandem::agentd
