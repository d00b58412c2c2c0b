// Rendezvous key-value stores: how the ranks of one group find each other before they talk.
// Each rank publishes its transport address under a key and reads the others'. Keys are written
// once; a reader blocks until the key appears or its deadline passes (nothing waits forever).
//
// Implementations: MemoryStore (ranks as threads of one process), FileStore (ranks as processes
// sharing a directory), PrefixStore (a view that tags every key with the group generation, so that
// ranks of generation 7 never pick up an address left behind by generation 6). The agent-hosted
// TCP store (orchestration) implements the same interface.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::engine {

class Store {
 public:
  virtual ~Store() = default;
  // Publishes `value` (any bytes) under `key`; a later Set of the same key replaces it.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists, then returns its value. DeadlineExceeded naming the key when it
  // does not appear within `timeout`.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          std::chrono::milliseconds timeout) = 0;
  // Blocks until every key exists. DeadlineExceeded naming the missing keys on timeout.
  // The default waits for each key in turn with the time that is left.
  virtual absl::Status Wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout);
  // "file:/tmp/x", "memory", "prefix gen7/ of file:/tmp/x": for error messages.
  virtual std::string Describe() const = 0;
};

// In-process store: a map guarded by a mutex, readers woken by a condition variable.
class MemoryStore final : public Store {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  std::string Describe() const override { return "memory"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

// One file per key in a directory (created when missing). Writes are atomic (write a temporary
// file, fsync, rename) so a reader never sees half a value; reads poll (1 ms doubling to 20 ms),
// which is cheap next to a rendezvous and works on any shared or local filesystem.
class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir);
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  std::string Describe() const override { return "file:" + dir_; }
  const std::string& dir() const { return dir_; }
  // The file that holds `key` (keys are escaped: anything but [A-Za-z0-9._-] becomes %XX).
  std::string PathFor(const std::string& key) const;

 private:
  std::string dir_;
};

// A view of `base` in which every key becomes "<prefix>/<key>". Used to tag all keys of a group
// with its generation (see GenerationPrefix) and to keep several comms in one store apart.
class PrefixStore final : public Store {
 public:
  PrefixStore(Store& base, std::string prefix);
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  std::string Describe() const override;
  const std::string& prefix() const { return prefix_; }

 private:
  std::string Key(const std::string& key) const { return prefix_ + "/" + key; }
  Store& base_;
  std::string prefix_;
};

// "gen7": the prefix under which the ranks of group generation 7 rendezvous.
std::string GenerationPrefix(uint64_t generation);

}  // namespace tandem::engine
