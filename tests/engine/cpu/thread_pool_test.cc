// The cpu backend's thread pool (engine/cpu/thread_pool.cc): ParallelFor hands out every index of
// [0, n) exactly once in at most one contiguous chunk per thread, runs nothing for n = 0, keeps a
// range smaller than the pool whole on the caller, and serves call after call; a chunk may run
// another pool's ParallelFor (the pool itself is not reentrant).
#include "engine/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::engine::cpu {
namespace {

// The chunks fn was called with, sorted, and how often each index was covered.
struct Coverage {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::vector<int> hits;
};

Coverage Cover(ThreadPool& pool, int64_t n) {
  Coverage c;
  c.hits.assign(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
  std::mutex mu;
  pool.ParallelFor(n, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    c.chunks.emplace_back(b, e);
    for (int64_t i = b; i < e; ++i) ++c.hits[i];
  });
  std::sort(c.chunks.begin(), c.chunks.end());
  return c;
}

TEST(ThreadPool, EveryIndexOnceInContiguousChunks) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  for (int64_t n : {2, 3, 4, 5, 7, 1000, 1001}) {
    const Coverage c = Cover(pool, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c.hits[i], 1) << "n " << n << " index " << i;
    ASSERT_LE(c.chunks.size(), 4u) << "n " << n;
    // Chunks tile [0, n) with no gaps and no empty calls.
    int64_t next = 0;
    for (const auto& [b, e] : c.chunks) {
      EXPECT_EQ(b, next) << "n " << n;
      EXPECT_LT(b, e) << "n " << n;
      next = e;
    }
    EXPECT_EQ(next, n);
    // Near-equal chunks: 1001 over 4 threads is 250 or 251 each.
    if (n == 1001) {
      for (const auto& [b, e] : c.chunks) EXPECT_TRUE(e - b == 250 || e - b == 251) << b << ".." << e;
    }
  }
}

TEST(ThreadPool, ZeroAndSingleIndexRunOnTheCaller) {
  ThreadPool pool(3);
  int calls = 0;
  pool.ParallelFor(0, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(-5, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  std::thread::id ran_on;
  pool.ParallelFor(1, [&](int64_t b, int64_t e) {
    ++calls;
    ran_on = std::this_thread::get_id();
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 1);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ThreadPool, APoolOfOneIsTheCaller) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  const Coverage c = Cover(pool, 50);
  ASSERT_EQ(c.chunks.size(), 1u);
  EXPECT_EQ(c.chunks[0], (std::pair<int64_t, int64_t>{0, 50}));
}

TEST(ThreadPool, ManyCallsInARowAndANestedPool) {
  ThreadPool outer(3), inner(2);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 200; ++round) {
    outer.ParallelFor(9, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
  }
  EXPECT_EQ(sum.load(), 200 * 36);
  // Each outer chunk runs a loop of its own on another pool (one at a time: `inner` is not reentrant).
  std::mutex inner_mu;
  std::vector<int> hits(6 * 10, 0);
  outer.ParallelFor(6, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(inner_mu);
    for (int64_t i = b; i < e; ++i) {
      inner.ParallelFor(10, [&](int64_t jb, int64_t je) {
        for (int64_t j = jb; j < je; ++j) ++hits[i * 10 + j];
      });
    }
  });
  for (size_t k = 0; k < hits.size(); ++k) EXPECT_EQ(hits[k], 1) << k;
}

}  // namespace
}  // namespace tandem::engine::cpu
