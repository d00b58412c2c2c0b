// RunRanksAsThreads: one rank's error stops the others (they are aborted, not left to their
// deadline), and a group of one runs on a LocalComm.
#include "engine/comm/rank_threads.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace tandem::engine {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// When one rank fails, RunRanksAsThreads aborts the others: no one waits out a 30 s deadline.
TEST(RankThreadsTest, OneRankFailingStopsTheOthers) {
  RankThreadsOptions opts;
  opts.timeout = 30000ms;
  auto start = Clock::now();
  absl::Status st = RunRanksAsThreads(
      3,
      [&](Comm& comm) -> absl::Status {
        if (comm.rank() == 2) return absl::NotFoundError("weights missing");
        std::vector<float> data(16, 1.0f);
        return comm.AllReduceSum(data.data(), data.size());
      },
      opts);
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("first error: %s after %.3f s\n", std::string(st.message()).c_str(), took);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "rank 2: weights missing");
  EXPECT_LT(took, 5.0);
}

TEST(RankThreadsTest, WorldOfOneUsesLocalComm) {
  absl::Status st = RunRanksAsThreads(1, [&](Comm& comm) -> absl::Status {
    EXPECT_EQ(comm.transport(), "local");
    float x[3] = {1, 2, 3};
    float all[3] = {0, 0, 0};
    if (absl::Status s = comm.AllReduceSum(x, 3); !s.ok()) return s;
    EXPECT_EQ(x[2], 3.0f);
    if (absl::Status s = comm.Gather(x, 3, all, 0); !s.ok()) return s;
    EXPECT_EQ(all[1], 2.0f);
    return comm.Barrier();
  });
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
}  // namespace tandem::engine
