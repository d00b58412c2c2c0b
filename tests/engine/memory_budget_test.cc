// The device's budget for the KV pool: fraction of the total minus what is in use, on a discrete
// GPU from the device's own numbers, on unified memory from MemTotal/MemAvailable so that the
// page cache holding the checkpoint is not counted as used on top of the weights; meminfo parsing.
#include "engine/memory_budget.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace tandem::engine {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// An H200: the process owns the device; its budget is the fraction of the total minus what the
// CUDA context and the weights already took.
TEST(KvSizing, DiscreteDeviceBudgetIsFractionOfTotalMinusUsed) {
  DeviceMemoryReading h200;
  h200.device_total = 140 * kGiB;
  h200.device_free = 80 * kGiB;  // 60 GiB of weights and context
  h200.host_total = 2000 * kGiB;
  h200.host_available = 100 * kGiB;  // host memory does not enter
  EXPECT_DOUBLE_EQ(DeviceKvBudgetBytes(0.9, h200), 0.9 * 140 * kGiB - 60.0 * kGiB);
}

// A DGX Spark after loading 60 GiB of weights: the file's pages are still in the page cache, which
// cudaMemGetInfo counts as used. Counting from MemAvailable, the weights count once; from the
// device's free memory they would count twice and the budget would go negative.
TEST(KvSizing, UnifiedMemoryCountsTheWeightsOnceNotAgainAsPageCache) {
  DeviceMemoryReading spark;
  spark.unified = true;
  spark.device_total = 119 * kGiB;
  spark.device_free = 5 * kGiB;  // 60 GiB weights + 50 GiB page cache + 4 GiB the rest
  spark.host_total = 119 * kGiB;
  spark.host_available = 55 * kGiB;  // the page cache is reclaimable
  const double budget = DeviceKvBudgetBytes(0.9, spark);
  std::printf("spark budget: %.1f GiB (device free alone: %.1f GiB)\n", budget / kGiB,
              (0.9 * 119 * kGiB - 114.0 * kGiB) / kGiB);
  EXPECT_DOUBLE_EQ(budget, 0.9 * 119 * kGiB - 64.0 * kGiB);
  EXPECT_GT(budget, 40.0 * kGiB);
  // Without a readable meminfo the device's numbers are all there is.
  spark.host_available = 0;
  EXPECT_DOUBLE_EQ(DeviceKvBudgetBytes(0.9, spark), 0.9 * 119 * kGiB - 114.0 * kGiB);
}

TEST(KvSizing, HostMemoryFromAMeminfoFile) {
  const std::string path = ::testing::TempDir() + "/meminfo";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("MemTotal:       124631428 kB\nMemFree:         3000000 kB\nMemAvailable:   60000000 kB\n"
               "Buffers:          100 kB\n", f);
    std::fclose(f);
  }
  const HostMemory m = ReadHostMemory(path);
  EXPECT_EQ(m.total, int64_t{124631428} * 1024);
  EXPECT_EQ(m.available, int64_t{60000000} * 1024);
  const HostMemory none = ReadHostMemory(path + ".absent");
  EXPECT_EQ(none.total, 0);
  EXPECT_EQ(none.available, 0);
}

}  // namespace
}  // namespace tandem::engine
