// How far a model load is, for the operator watching it: the checkpoint counts what the loader
// reads (tensors touched at least once, stored bytes read), LoadProgressLog turns that into a
// log line every few seconds and at each 10%. The tensor count is the percentage: every rank
// reads a slice of nearly every tensor, while its bytes are only its shard's. Tensors the model
// does not use (a vision tower) are never read, so a load can end below 100%.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace tandem::engine {

struct LoadProgress {
  // Tensors in the checkpoint's headers, once per rank that opened it (ranks as threads of one
  // process share a LoadProgress), and the tensors each of them read at least once.
  std::atomic<int64_t> tensors_total{0};
  std::atomic<int64_t> tensors_read{0};
  std::atomic<int64_t> bytes_total{0};    // stored bytes of every tensor
  std::atomic<int64_t> bytes_read{0};     // stored bytes of the slices read (this rank's shard)
};

// "40% (120/300 tensors, 1.2 of 57.0 GiB read)"; "opening" before the checkpoint is open.
std::string DescribeLoadProgress(const LoadProgress& progress);

// While alive, logs "loading WHAT: <DescribeLoadProgress>" every `every` and whenever the
// percentage passes another 10%; Done() logs "loaded WHAT in S s".
class LoadProgressLog {
 public:
  LoadProgressLog(std::string what, const LoadProgress* progress,
                  std::chrono::milliseconds every = std::chrono::seconds(5));
  ~LoadProgressLog();  // stops the thread (no "loaded" line without Done)
  LoadProgressLog(const LoadProgressLog&) = delete;
  LoadProgressLog& operator=(const LoadProgressLog&) = delete;
  void Done();

 private:
  void Stop();
  const std::string what_;
  const LoadProgress* progress_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tandem::engine
