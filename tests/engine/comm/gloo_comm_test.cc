// GlooComm with ranks as threads of this process (RunRanksAsThreads over a MemoryStore): results
// of every collective against values computed here, deadlines, abort from another thread,
// generation isolation, device selection, bad options, and a group of one. The deadlines are
// real: a collective's timeout is a socket deadline inside Gloo, so the tests wait it out; and a
// rank that is late or aborts does so after a real pause, because nothing outside Gloo says when
// a peer has blocked inside a collective.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "common/status.h"
#include "engine/comm/gloo_comm.h"
#include "engine/comm/rank_threads.h"
#include "engine/comm/store.h"

namespace tandem::engine {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Two ranks as threads with a collective deadline of `timeout`: rank 1 stays alive and connected
// but joins no collective until `rank0` (rank 0's part of the test) has returned.
absl::Status RunWithSilentRank1(std::chrono::milliseconds timeout, const std::function<void(Comm&)>& rank0) {
  std::promise<void> rank0_done;
  std::shared_future<void> rank0_done_future = rank0_done.get_future().share();
  RankThreadsOptions opts;
  opts.timeout = timeout;
  return RunRanksAsThreads(
      2,
      [&](Comm& comm) -> absl::Status {
        if (comm.rank() == 1) {
          rank0_done_future.wait();
          return absl::OkStatus();
        }
        rank0(comm);
        rank0_done.set_value();
        return absl::OkStatus();
      },
      opts);
}

// Rank r contributes (r + 1) * 1000 + i * 0.25 at index i: every term and every partial sum is
// exact in float for the sizes used, so the expected sum is exact and a missing or doubled rank
// is off by at least 1000.
float Contribution(int rank, size_t i) {
  return static_cast<float>((rank + 1) * 1000) + static_cast<float>(i % 4096) * 0.25f;
}
float ExpectedSum(int world, size_t i) {
  float s = 0;
  for (int r = 0; r < world; ++r) s += Contribution(r, i);
  return s;
}

absl::Status Fail(const std::string& msg) { return absl::InternalError(msg); }

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, AllReduceSumsRankDependentValues) {
  const int world = GetParam();
  // 1 float, an odd size, a hidden size, and more than Gloo's 1 MiB segment (several segments).
  const std::vector<size_t> sizes = {1, 7, 4096, 300000};
  absl::Status st = RunRanksAsThreads(world, [&](Comm& comm) -> absl::Status {
    EXPECT_EQ(comm.world_size(), world);
    EXPECT_EQ(comm.transport(), "gloo/tcp");
    for (size_t n : sizes) {
      for (int round = 0; round < 3; ++round) {  // repeated: the tags advance and still match
        std::vector<float> data(n);
        for (size_t i = 0; i < n; ++i) data[i] = Contribution(comm.rank(), i);
        absl::Status s = comm.AllReduceSum(data.data(), n);
        if (!s.ok()) return s;
        for (size_t i = 0; i < n; ++i) {
          if (data[i] != ExpectedSum(world, i)) {
            return Fail("all-reduce n=" + std::to_string(n) + " index " + std::to_string(i) +
                        ": got " + std::to_string(data[i]) + " want " +
                        std::to_string(ExpectedSum(world, i)));
          }
        }
        if (comm.rank() == 0 && round == 0) {
          std::printf("world %d n=%zu: data[0]=%.2f (want %.2f) data[n-1]=%.2f (want %.2f)\n",
                      world, n, data[0], ExpectedSum(world, 0), data[n - 1],
                      ExpectedSum(world, n - 1));
        }
      }
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

TEST_P(CollectivesTest, BroadcastFromRoot1) {
  const int world = GetParam();
  absl::Status st = RunRanksAsThreads(world, [&](Comm& comm) -> absl::Status {
    for (size_t nbytes : {size_t{1}, size_t{333}, size_t{1} << 20}) {
      std::vector<uint8_t> buf(nbytes, 0);
      if (comm.rank() == 1) {
        for (size_t i = 0; i < nbytes; ++i) buf[i] = static_cast<uint8_t>((i * 31 + 7) & 0xff);
      }
      absl::Status s = comm.Broadcast(buf.data(), nbytes, /*root=*/1);
      if (!s.ok()) return s;
      for (size_t i = 0; i < nbytes; ++i) {
        if (buf[i] != static_cast<uint8_t>((i * 31 + 7) & 0xff)) {
          return Fail("broadcast byte " + std::to_string(i) + " of " + std::to_string(nbytes) +
                      " differs");
        }
      }
    }
    if (comm.rank() == 0)
      std::printf("world %d: broadcast of 1, 333, 1 MiB bytes from rank 1 matched\n", world);
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

TEST_P(CollectivesTest, GatherInRankOrder) {
  const int world = GetParam();
  const size_t n = 5;
  absl::Status st = RunRanksAsThreads(world, [&](Comm& comm) -> absl::Status {
    for (int root : {0, world - 1}) {
      std::vector<float> send(n);
      for (size_t i = 0; i < n; ++i) send[i] = static_cast<float>(comm.rank() * 100 + i);
      std::vector<float> recv(comm.rank() == root ? n * world : 0, -1.0f);
      absl::Status s =
          comm.Gather(send.data(), n, comm.rank() == root ? recv.data() : nullptr, root);
      if (!s.ok()) return s;
      if (comm.rank() != root) continue;
      for (int r = 0; r < world; ++r) {
        for (size_t i = 0; i < n; ++i) {
          if (recv[r * n + i] != static_cast<float>(r * 100 + i)) {
            return Fail("gather to " + std::to_string(root) + ": slot of rank " +
                        std::to_string(r) + " index " + std::to_string(i) + " holds " +
                        std::to_string(recv[r * n + i]));
          }
        }
      }
      std::printf("world %d gather to %d: recv[0]=%.0f recv[last]=%.0f\n", world, root, recv[0],
                  recv.back());
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
}

TEST_P(CollectivesTest, BarrierHoldsEveryoneUntilTheLastArrives) {
  const int world = GetParam();
  std::atomic<int> arrived{0};
  absl::Status st = RunRanksAsThreads(world, [&](Comm& comm) -> absl::Status {
    for (int round = 1; round <= 3; ++round) {
      if (comm.rank() == world - 1) std::this_thread::sleep_for(100ms);  // the late rank
      arrived.fetch_add(1);
      absl::Status s = comm.Barrier();
      if (!s.ok()) return s;
      // Nobody leaves barrier `round` before all `world` ranks arrived at it.
      if (arrived.load() < round * world) {
        return Fail("rank " + std::to_string(comm.rank()) + " left barrier " +
                    std::to_string(round) + " with only " + std::to_string(arrived.load()) +
                    " arrivals");
      }
      s = comm.Barrier();  // keep the rounds apart
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(arrived.load(), 3 * world);
}

INSTANTIATE_TEST_SUITE_P(Worlds, CollectivesTest, ::testing::Values(2, 4));

// Rank 1 never calls the collective: rank 0 must get DeadlineExceeded at about the deadline,
// and every later call must fail at once. 4096 floats take the direct-exchange path, 400000
// floats Gloo's ring.
class DeadlineTest : public ::testing::TestWithParam<size_t> {};

TEST_P(DeadlineTest, MissingPeerGivesDeadlineExceededThenFailsFast) {
  const size_t n = GetParam();
  const std::string what = "all-reduce of " + std::to_string(n) + " floats";
  absl::Status st = RunWithSilentRank1(1000ms, [&](Comm& comm) {
    std::vector<float> data(n, 1.0f);
    auto start = Clock::now();
    absl::Status s = comm.AllReduceSum(data.data(), data.size());
    double took = SecondsSince(start);
    std::printf("missing peer: %s after %.3f s\n", std::string(s.message()).c_str(), took);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(s.message().find(what + " did not complete within 1 s (rank 0 of 2); peer lost?"),
              absl::string_view::npos);
    EXPECT_GE(took, 0.9);
    EXPECT_LT(took, 1.0 + 2.0);
    EXPECT_TRUE(comm.aborted());

    start = Clock::now();
    absl::Status later = comm.Barrier();
    double later_took = SecondsSince(start);
    std::printf("later call: %s after %.4f s\n", std::string(later.message()).c_str(),
                later_took);
    EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(later.message().find("comm aborted: " + what + " did not complete"),
              absl::string_view::npos);
    EXPECT_LT(later_took, 0.1);
  });
  EXPECT_TRUE(st.ok()) << st;
}

INSTANTIATE_TEST_SUITE_P(Sizes, DeadlineTest, ::testing::Values(size_t{4096}, size_t{400000}));

// Abort from a third thread while rank 0 waits in an all-reduce that rank 1 never joins.
TEST(AbortTest, AbortFromAnotherThreadUnblocksPendingCollective) {
  absl::Status st = RunWithSilentRank1(30000ms, [&](Comm& comm) {
    std::thread aborter([&] {
      std::this_thread::sleep_for(300ms);
      comm.Abort("operator pressed stop");
    });
    std::vector<float> data(128, 1.0f);
    auto start = Clock::now();
    absl::Status s = comm.AllReduceSum(data.data(), data.size());
    double took = SecondsSince(start);
    aborter.join();
    std::printf("aborted collective: %s after %.3f s\n", std::string(s.message()).c_str(),
                took);
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_NE(s.message().find("operator pressed stop"), absl::string_view::npos);
    EXPECT_GE(took, 0.25);
    EXPECT_LT(took, 2.0);  // far below the 30 s deadline
    absl::Status later = comm.AllReduceSum(data.data(), data.size());
    EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(later.message(), "comm aborted: operator pressed stop");
  });
  EXPECT_TRUE(st.ok()) << st;
}

// A rank that aborts its own comm closes its connections: the peers blocked in a collective
// with it fail through the closed sockets at once, not at their 30 s deadline.
TEST(AbortTest, AbortingOneRankFailsItsPeersQuickly) {
  RankThreadsOptions opts;
  opts.timeout = 30000ms;
  absl::Status st = RunRanksAsThreads(
      3,
      [&](Comm& comm) -> absl::Status {
        if (comm.rank() == 2) {
          std::this_thread::sleep_for(300ms);
          comm.Abort("rank 2 leaves");
          return absl::OkStatus();
        }
        auto start = Clock::now();
        absl::Status s = comm.Barrier();
        double took = SecondsSince(start);
        std::printf("rank %d: %s after %.3f s\n", comm.rank(), std::string(s.message()).c_str(),
                    took);
        EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
        EXPECT_LT(took, 3.0);
        return absl::OkStatus();
      },
      opts);
  EXPECT_TRUE(st.ok()) << st;
}

// A group of one needs no store and no sockets: CreateGlooComm gives a LocalComm.
TEST(GlooCommTest, WorldOfOneIsLocalComm) {
  GlooCommOptions o;  // no store needed
  auto comm = CreateGlooComm(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->transport(), "local");
  float x = 2;
  EXPECT_TRUE((*comm)->AllReduceSum(&x, 1).ok());
  EXPECT_EQ(x, 2.0f);
}

// A rank of generation 2 must not connect to a rank of generation 1 through the same store:
// both wait for their own generation's keys and fail at the connect deadline, naming the key.
TEST(GenerationTest, RanksOfDifferentGenerationsDoNotRendezvous) {
  MemoryStore base;
  PrefixStore gen1(base, GenerationPrefix(1));
  PrefixStore gen2(base, GenerationPrefix(2));
  auto rank_of_two = [](Store* store, int rank) {
    GlooCommOptions o;
    o.store = store;
    o.rank = rank;
    o.world_size = 2;
    o.connect_timeout = 1500ms;
    return o;
  };
  absl::Status st_old, st_new;
  double took_new = 0;
  std::thread old_rank([&] { st_old = CreateGlooComm(rank_of_two(&gen1, 1)).status(); });
  std::thread new_rank([&] {
    auto start = Clock::now();
    st_new = CreateGlooComm(rank_of_two(&gen2, 0)).status();
    took_new = SecondsSince(start);
  });
  old_rank.join();
  new_rank.join();
  std::printf("gen2 rank 0: %s after %.3f s\ngen1 rank 1: %s\n",
              std::string(st_new.message()).c_str(), took_new,
              std::string(st_old.message()).c_str());
  EXPECT_EQ(st_new.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(st_new.message().find("'gen2/1'"), absl::string_view::npos) << st_new;
  EXPECT_NE(st_new.message().find("rank 0 of 2 could not rendezvous"), absl::string_view::npos);
  EXPECT_EQ(st_old.code(), absl::StatusCode::kDeadlineExceeded);
  // Gloo's own order decides which gen1 key the old rank waited for ("gen1/0" or "gen1/rank_0").
  EXPECT_NE(st_old.message().find("key 'gen1/"), absl::string_view::npos) << st_old;
  EXPECT_EQ(st_old.message().find("gen2"), absl::string_view::npos) << st_old;
  EXPECT_GE(took_new, 1.4);
  EXPECT_LT(took_new, 3.5);
}

// An interface name selects Gloo's iface attribute; GLOO_SOCKET_IFNAME overrides the option.
TEST(GlooCommTest, InterfaceNameAndGlooSocketIfnameSelectTheDevice) {
  auto sum_over = [](const std::string& where) {
    RankThreadsOptions opts;
    opts.hostname_or_iface = where;
    opts.connect_timeout = 5000ms;
    return RunRanksAsThreads(
        2,
        [&](Comm& comm) -> absl::Status {
          float x = static_cast<float>(comm.rank() + 1);
          RETURN_IF_ERROR(comm.AllReduceSum(&x, 1));
          return x == 3.0f ? absl::OkStatus() : Fail("sum " + std::to_string(x));
        },
        opts);
  };
  absl::Status by_iface = sum_over("lo");
  EXPECT_TRUE(by_iface.ok()) << by_iface;
  // An unresolvable host fails to open the device...
  absl::Status bad = sum_over("no-such-host.invalid");
  EXPECT_EQ(bad.code(), absl::StatusCode::kUnavailable) << bad;
  std::printf("bad host: %s\n", std::string(bad.message()).c_str());
  // ...unless GLOO_SOCKET_IFNAME names an interface, which wins.
  setenv("GLOO_SOCKET_IFNAME", "lo", 1);
  absl::Status by_env = sum_over("no-such-host.invalid");
  EXPECT_TRUE(by_env.ok()) << by_env;
  setenv("GLOO_SOCKET_IFNAME", "nosuchif0", 1);
  absl::Status bad_env = sum_over("127.0.0.1");
  unsetenv("GLOO_SOCKET_IFNAME");
  EXPECT_EQ(bad_env.code(), absl::StatusCode::kUnavailable) << bad_env;
  EXPECT_NE(bad_env.message().find("nosuchif0 (GLOO_SOCKET_IFNAME)"), absl::string_view::npos)
      << bad_env;
  // An address that is not on this host cannot be listened on.
  absl::Status not_local = sum_over("192.0.2.1");  // TEST-NET-1
  EXPECT_EQ(not_local.code(), absl::StatusCode::kUnavailable) << not_local;
  std::printf("bad env: %s\nnot local: %s\n", std::string(bad_env.message()).c_str(),
              std::string(not_local.message()).c_str());
}

TEST(GlooCommTest, RejectsBadOptions) {
  MemoryStore store;
  GlooCommOptions o;
  o.world_size = 2;
  EXPECT_EQ(CreateGlooComm(o).status().code(), absl::StatusCode::kInvalidArgument);  // no store
  o.store = &store;
  o.rank = 2;
  o.world_size = 2;
  EXPECT_EQ(CreateGlooComm(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::engine
