// comm_bench: latency of AllReduceSum between ranks running as threads over Gloo on loopback.
// Usage: comm_bench [--ranks N] [--iters N]. Prints one line per size and algorithm ("direct":
// our one-step exchange, the default up to 256 KiB sent per rank; "ring": Gloo's ring): median,
// p10, p90 in us, and the algorithm bandwidth (bytes / median time).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/comm/rank_threads.h"

using tandem::engine::Comm;

int main(int argc, char** argv) {
  int ranks = 2;
  int iters = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) ranks = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  // 512 B and 16 KiB are hidden sizes 128 and 4096 (one per-layer all-reduce); 1 MiB is a
  // prefill chunk of 64 tokens x 4096.
  const std::vector<size_t> sizes_bytes = {512, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024};
  std::printf("all-reduce (float sum), %d ranks as threads, gloo/tcp on 127.0.0.1\n", ranks);
  std::printf("%10s %7s %8s %12s %12s %12s %12s\n", "bytes", "algo", "iters", "median_us", "p10_us",
              "p90_us", "algbw_MB/s");
  for (size_t bytes : sizes_bytes) {
    for (bool ring : {false, true}) {
      tandem::engine::RankThreadsOptions options;
      if (ring) options.direct_allreduce_max_bytes = 0;
      const bool direct = !ring && bytes * (ranks - 1) <= options.direct_allreduce_max_bytes;
      if (!ring && !direct) continue;
      const size_t n = bytes / sizeof(float);
      const int count = bytes >= 1024 * 1024 ? std::max(50, iters / 10) : iters;
      std::vector<double> times_us;
      absl::Status st = tandem::engine::RunRanksAsThreads(
          ranks,
          [&](Comm& comm) -> absl::Status {
            std::vector<float> data(n, 1.0f);
            for (int w = 0; w < 50; ++w) {  // warm-up: connections, caches, page faults
              absl::Status s = comm.AllReduceSum(data.data(), n);
              if (!s.ok()) return s;
            }
            for (int it = 0; it < count; ++it) {
              auto t0 = std::chrono::steady_clock::now();
              absl::Status s = comm.AllReduceSum(data.data(), n);
              auto t1 = std::chrono::steady_clock::now();
              if (!s.ok()) return s;
              if (comm.rank() == 0)
                times_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            }
            return absl::OkStatus();
          },
          options);
      if (!st.ok()) {
        std::fprintf(stderr, "comm_bench: %s\n", std::string(st.message()).c_str());
        return 1;
      }
      std::sort(times_us.begin(), times_us.end());
      auto at = [&](double q) { return times_us[static_cast<size_t>(q * (times_us.size() - 1))]; };
      std::printf("%10zu %7s %8d %12.1f %12.1f %12.1f %12.1f\n", bytes, ring ? "ring" : "direct",
                  count, at(0.5), at(0.1), at(0.9), static_cast<double>(bytes) / at(0.5));
    }
  }
  return 0;
}
