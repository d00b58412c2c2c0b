// Adapter that lets Gloo's connectFullMesh rendezvous through one of our Stores.
// Gloo's store interface reports failure by throwing; the adapter throws gloo::IoException and
// keeps the Store's own Status, so the caller can return the precise error (which key, which
// store, how long) instead of Gloo's generic text.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/comm/store.h"
#include "gloo/rendezvous/store.h"

namespace tandem::engine {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  // `timeout` bounds every get/wait that Gloo makes without a timeout of its own.
  GlooStoreAdapter(tandem::engine::Store& store, std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The first error the underlying store returned (OK when none).
  absl::Status first_error() const;

 private:
  [[noreturn]] void Fail(const absl::Status& st);

  tandem::engine::Store& store_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  absl::Status first_error_;
};

}  // namespace tandem::engine
