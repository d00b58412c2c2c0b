// The CUDA backend's page-locked logits pool (engine/cuda/pinned_logit_pool.h): Reserve then Take
// reuses, buffers come back on Give, at most kKeepFree stay idle, and the buffers are page-locked
// (the device copies into them).
#include "engine/cuda/pinned_logit_pool.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/step.h"

namespace tandem::engine::cuda {
namespace {

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(PinnedLogitPoolCudaTest, ReusesIdleBuffersAndKeepsFewIdle) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  PinnedLogitPool pool;
  ASSERT_TRUE(pool.Reserve(1000).ok());
  EXPECT_EQ(pool.buffers(), 1u);
  void* a = pool.Take(800);  // the reserved one: big enough
  EXPECT_EQ(pool.buffers(), 1u);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, a), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);  // page-locked, registered with CUDA
  void* b = pool.Take(1000);  // nothing idle: a new one
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.buffers(), 2u);
  pool.Give(a, 800);
  EXPECT_EQ(pool.Take(500), a);  // idle again, reused
  std::vector<void*> many{a, b};
  for (int i = 0; i < 4; ++i) many.push_back(pool.Take(100));
  EXPECT_EQ(pool.buffers(), 6u);
  for (void* p : many) pool.Give(p, 100);
  EXPECT_EQ(pool.buffers(), PinnedLogitPool::kKeepFree);
}

TEST(PinnedLogitPoolCudaTest, DeviceCopiesIntoTheLogitsRowsAndTheBufferReturns) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  auto pool = std::make_shared<PinnedLogitPool>();
  const std::vector<float> want{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  float* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, want.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dev, want.data(), want.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  const float* first = nullptr;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(pool->Reserve(want.size() * sizeof(float)).ok());
    Logits l;
    l.vocab = 3;
    l.data = LogitVector(LogitAllocator<float>(pool));
    l.data.resize(want.size());
    ASSERT_EQ(cudaMemcpy(l.data.data(), dev, want.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::vector<float>(l.data.begin(), l.data.end()), want);
    if (step == 0) first = l.data.data();
    EXPECT_EQ(l.data.data(), first) << "step " << step << " should reuse the first step's buffer";
  }
  EXPECT_EQ(pool->buffers(), 1u);
  cudaFree(dev);
}

}  // namespace
}  // namespace tandem::engine::cuda
