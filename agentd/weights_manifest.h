// The weights manifest: sha256 of every regular file under a model folder, so the controller
// can prove every node holds byte-identical weights. Hashing a 60 GB model takes minutes, so
// digests are cached in the state dir by absolute path and (device, inode, size, mtime, ctime) —
// ctime because utime() can set mtime back but not ctime — and a repeat is near-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::agentd {

struct HashOptions {
  unsigned threads = 0;  // 0: std::thread::hardware_concurrency()
  // Called from the calling thread about every `progress_interval` and once at the end.
  std::function<void(const v1::HashProgress&)> on_progress;
  std::chrono::milliseconds progress_interval{200};
  // Polled with the progress; returning true stops the workers (result: kCancelled).
  std::function<bool()> cancelled;
  // false: ignore the cache and read every byte (the new digests still refresh it).
  bool use_cache = true;
};

// One per process: it owns the cache file in `state_dir` ("" = no cache) and serialises its
// updates, so concurrent requests share digests safely.
class WeightsHasher {
 public:
  explicit WeightsHasher(std::string state_dir);

  // Walks `model_path` (directories named .git or .cache are skipped: they hold per-clone and
  // per-download metadata that differs between identical copies), hashes every regular file
  // and every symlink's target, and returns the manifest sorted by '/'-separated relative
  // path. A file that cannot be read is listed with its error; a missing folder is
  // kNotFound; a cancelled run is kCancelled.
  absl::StatusOr<v1::WeightsManifest> Hash(const std::string& model_path, const HashOptions& opts);

  std::string cache_path() const;

 private:
  std::string state_dir_;
  std::mutex cache_mu_;  // guards the cache file (load, merge, atomic save)
};

}  // namespace tandem::agentd
