// The fabric check's NCCL path (agentd/fabric_check.h MeasureCollectives on an NCCL comm: device
// buffers, each all-reduce enqueued on a stream and waited for): a world of one on GPU 0, and two
// ranks as threads on GPUs 0 and 1 where two are visible (their sum checked, busbw = algbw at
// n = 2). Skips, saying why, without the GPUs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>
#include <vector>

#include "agentd/fabric_check.h"
#include "engine/comm/store.h"
#include "engine/cuda/nccl_comm.h"

namespace tandem::agentd {
namespace {

int VisibleGpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

CollectiveLoops GpuLoops() {
  CollectiveLoops l;
  l.small_iters = 50;
  l.small_warmup = 5;
  l.large_bytes = size_t{16} << 20;
  l.large_iters = 5;
  l.large_warmup = 1;
  return l;
}

void Print(const char* what, const v1::CheckFabricResponse& r) {
  std::printf("%s: %s, 4 KiB median %.1f us p99 %.1f us; %zu MiB x %u: algbw %.2f GB/s busbw %.2f GB/s\n", what,
              r.transport().c_str(), r.small_median_us(), r.small_p99_us(), static_cast<size_t>(r.large_bytes() >> 20),
              r.large_iters(), r.large_algbw_gbps(), r.large_busbw_gbps());
}

TEST(fabric_check_cuda, WorldOfOneTimesDeviceBuffers) {
  if (VisibleGpus() < 1) GTEST_SKIP() << "no CUDA device";
  engine::MemoryStore store;
  engine::cuda::NcclCommOptions o;
  o.store = &store;
  o.timeout = std::chrono::milliseconds(10000);
  auto comm = engine::cuda::CreateNcclComm(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  v1::CheckFabricResponse r;
  absl::Status st = MeasureCollectives(**comm, GpuLoops(), &r);
  ASSERT_TRUE(st.ok()) << st;
  Print("nccl world 1", r);
  EXPECT_EQ(r.small_iters(), 50u);
  EXPECT_GT(r.small_median_us(), 0);
  EXPECT_GT(r.large_algbw_gbps(), 0);
  EXPECT_EQ(r.large_busbw_gbps(), 0);  // one rank: nothing crosses a link
}

TEST(fabric_check_cuda, TwoGpusAsThreadsSumAndMeasure) {
  if (VisibleGpus() < 2) GTEST_SKIP() << "needs 2 CUDA devices, " << VisibleGpus() << " visible";
  engine::MemoryStore store;
  std::vector<v1::CheckFabricResponse> out(2);
  std::vector<absl::Status> st(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      engine::cuda::NcclCommOptions o;
      o.rank = r;
      o.world_size = 2;
      o.device = r;
      o.store = &store;
      o.timeout = std::chrono::milliseconds(20000);
      o.connect_timeout = std::chrono::milliseconds(60000);
      auto comm = engine::cuda::CreateNcclComm(o);
      st[r] = comm.ok() ? MeasureCollectives(**comm, GpuLoops(), &out[r]) : comm.status();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
    Print(r == 0 ? "nccl rank 0 of 2" : "nccl rank 1 of 2", out[r]);
    EXPECT_GT(out[r].small_median_us(), 0);
    EXPECT_GT(out[r].large_busbw_gbps(), 0);
    EXPECT_DOUBLE_EQ(out[r].large_busbw_gbps(), out[r].large_algbw_gbps());
  }
}

}  // namespace
}  // namespace tandem::agentd
