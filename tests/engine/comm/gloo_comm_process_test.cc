// GlooComm with ranks as separate processes (comm_test_rank) talking over loopback, rendezvous
// through a FileStore in a temporary directory; and a peer process killed with SIGKILL in the
// middle of a collective. It crosses several sources (gloo_comm, gloo_store, store, subprocess),
// so it is named after the entry point it drives, CreateGlooComm. The half-second before the kill
// stays a real wait: what is tested is a peer lost while the survivor sits in a collective.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "engine/comm/gloo_comm.h"
#include "engine/comm/store.h"
#include "tests/common/test_util.h"

namespace tandem::engine {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string TempDir() { return testing::MakeTempDir("comm_proc"); }

Subprocess StartRank(const std::string& dir, int rank, int world, const std::string& mode) {
  SubprocessOptions o;
  o.argv = {
      COMM_TEST_RANK_BIN,   "--store-dir", dir + "/store",        "--generation", "5", "--rank",
      std::to_string(rank), "--world",     std::to_string(world), "--mode",       mode};
  o.stdout_path = dir + "/rank" + std::to_string(rank) + ".log";
  o.stderr_path = o.stdout_path;
  Subprocess p;
  std::string error;
  EXPECT_TRUE(p.Start(o, &error)) << error;
  return p;
}

class ProcessGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(ProcessGroupTest, EveryCollectiveMatchesAcrossProcesses) {
  const int world = GetParam();
  const std::string dir = TempDir();
  std::vector<Subprocess> ranks;
  // Highest rank first: the order must not matter.
  for (int r = world - 1; r >= 0; --r) ranks.push_back(StartRank(dir, r, world, "sum"));
  for (int i = 0; i < world; ++i) {
    const int r = world - 1 - i;
    auto status = ranks[i].Wait(60s);
    std::string log = testing::ReadTextFile(dir + "/rank" + std::to_string(r) + ".log");
    std::printf("--- rank %d (%s):\n%s", r,
                status ? DescribeWaitStatus(*status).c_str() : "timeout", log.c_str());
    ASSERT_TRUE(status.has_value()) << "rank " << r << " did not finish in 60 s";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
    EXPECT_NE(log.find("OK (all-reduce, broadcast, gather, barrier)"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, ProcessGroupTest, ::testing::Values(2, 4));

// This process is rank 0; rank 1 is a child. Both sit in (different) collectives when the child
// is SIGKILLed: rank 0 must fail through the connection reset, long before its 20 s deadline.
TEST(PeerLossTest, KilledPeerProcessFailsTheSurvivorQuickly) {
  const std::string dir = TempDir();
  Subprocess child = StartRank(dir, 1, 2, "stall");
  FileStore files(dir + "/store");
  PrefixStore store(files, GenerationPrefix(5));
  GlooCommOptions o;
  o.store = &store;
  o.rank = 0;
  o.world_size = 2;
  o.timeout = 20000ms;
  o.connect_timeout = 30000ms;
  auto created = CreateGlooComm(o);
  ASSERT_TRUE(created.ok()) << created.status();
  Comm& comm = **created;
  std::vector<float> data(16, 1.0f);
  ASSERT_TRUE(comm.AllReduceSum(data.data(), data.size()).ok());
  EXPECT_EQ(data[0], 3.0f);                    // 1 (rank 0) + 2 (rank 1)
  ASSERT_TRUE(store.Get("ready1", 10s).ok());  // the child is entering its second all-reduce

  Clock::time_point killed_at;
  std::thread killer([&] {
    std::this_thread::sleep_for(500ms);
    killed_at = Clock::now();
    child.Signal(SIGKILL);
  });
  auto start = Clock::now();
  absl::Status st = comm.Barrier();  // the child is in an all-reduce: never matches
  auto failed_at = Clock::now();
  killer.join();
  double after_kill = std::chrono::duration<double>(failed_at - killed_at).count();
  double total = std::chrono::duration<double>(failed_at - start).count();
  std::printf("survivor: %s\n  %.3f s after SIGKILL, %.3f s after entering the barrier\n",
              std::string(st.message()).c_str(), after_kill, total);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("barrier failed after"), absl::string_view::npos);
  EXPECT_LT(after_kill, 3.0);
  EXPECT_LT(total, 20.0);
  auto wait = child.Wait(5s);
  ASSERT_TRUE(wait.has_value());
  EXPECT_TRUE(WIFSIGNALED(*wait) && WTERMSIG(*wait) == SIGKILL) << DescribeWaitStatus(*wait);
  absl::Status later = comm.AllReduceSum(data.data(), data.size());
  EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tandem::engine
