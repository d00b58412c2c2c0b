// Rendezvous stores: set/get/wait, deadlines that name the key, atomic file writes, prefixes.
// The waits are real time: a Get's deadline is what is tested, and a writer on another thread
// (or process, for FileStore) shares no clock with the reader but the steady clock.
#include "engine/comm/store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/common/test_util.h"

namespace tandem::engine {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string TempDir() { return testing::MakeTempDir("comm_store"); }

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(FileStoreTest, SetThenGetReturnsBytes) {
  FileStore store(TempDir() + "/nested/dir");
  const std::string value("addr\0with\xffnull", 14);
  ASSERT_TRUE(store.Set("gen3/rank_0", value).ok());
  auto got = store.Get("gen3/rank_0", 1s);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
  ASSERT_TRUE(store.Set("gen3/rank_0", "replaced").ok());
  EXPECT_EQ(*store.Get("gen3/rank_0", 1s), "replaced");
  // Keys are escaped into one flat directory: '/' never creates subfolders.
  EXPECT_EQ(store.PathFor("gen3/rank_0"), store.dir() + "/gen3%2Frank_0");
  EXPECT_TRUE(std::filesystem::exists(store.PathFor("gen3/rank_0")));
}

TEST(FileStoreTest, GetMissingKeyTimesOutNamingTheKey) {
  FileStore store(TempDir());
  auto start = Clock::now();
  auto got = store.Get("gen1/7", 300ms);
  double took = SecondsSince(start);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(got.status().message().find("'gen1/7'"), absl::string_view::npos) << got.status();
  std::printf("Get deadline: %s after %.3f s\n", std::string(got.status().message()).c_str(), took);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 1.5);
}

TEST(FileStoreTest, GetBlocksUntilAnotherWriterSets) {
  std::string dir = TempDir();
  FileStore reader(dir);
  FileStore writer(dir);  // a second instance: as another process would see it
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);
    ASSERT_TRUE(writer.Set("late", "here").ok());
  });
  auto start = Clock::now();
  auto got = reader.Get("late", 5s);
  double took = SecondsSince(start);
  t.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 2.0);
}

TEST(FileStoreTest, WaitForSeveralKeysAndReportTheMissingOnes) {
  FileStore store(TempDir());
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(store.Set("a", "1").ok());
    ASSERT_TRUE(store.Set("b", "2").ok());
  });
  EXPECT_TRUE(store.Wait({"a", "b"}, 5s).ok());
  t.join();
  absl::Status st = store.Wait({"a", "c", "d"}, 200ms);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("keys 'c', 'd' did not appear"), absl::string_view::npos) << st;
  std::printf("Wait deadline: %s\n", std::string(st.message()).c_str());
}

TEST(FileStoreTest, LeavesNoTemporaryFiles) {
  FileStore store(TempDir());
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(store.Set("k" + std::to_string(i), std::string(1000, 'x')).ok());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(store.dir())) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp", 0), 0u) << e.path();
    ++files;
  }
  EXPECT_EQ(files, 20);
}

TEST(MemoryStoreTest, GetWaitsForSetAndTimesOut) {
  MemoryStore store;
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(store.Set("x", "42").ok());
  });
  auto got = store.Get("x", 5s);
  t.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "42");
  auto missing = store.Get("y", 100ms);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("'y'"), absl::string_view::npos);
}

TEST(PrefixStoreTest, GenerationsDoNotMix) {
  FileStore base(TempDir());
  PrefixStore gen1(base, GenerationPrefix(1));
  PrefixStore gen2(base, GenerationPrefix(2) + "/");  // a trailing '/' is not doubled
  EXPECT_EQ(gen1.prefix(), "gen1");
  EXPECT_EQ(gen2.prefix(), "gen2");
  ASSERT_TRUE(gen1.Set("0", "address of gen1 rank 0").ok());
  ASSERT_TRUE(gen2.Set("1", "address of gen2 rank 1").ok());

  EXPECT_EQ(*gen1.Get("0", 1s), "address of gen1 rank 0");
  EXPECT_EQ(*gen2.Get("1", 1s), "address of gen2 rank 1");
  EXPECT_EQ(*base.Get("gen1/0", 1s), "address of gen1 rank 0");
  // Generation 2 must not see generation 1's key, and the reverse.
  auto cross = gen2.Get("0", 200ms);
  EXPECT_EQ(cross.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(cross.status().message().find("'gen2/0'"), absl::string_view::npos) << cross.status();
  EXPECT_EQ(gen1.Get("1", 200ms).status().code(), absl::StatusCode::kDeadlineExceeded);
  absl::Status wait = gen2.Wait({"0", "1"}, 200ms);
  EXPECT_EQ(wait.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(wait.message().find("gen2/0"), absl::string_view::npos) << wait;
  EXPECT_EQ(wait.message().find("gen2/1"), absl::string_view::npos) << wait;
  std::printf("cross-generation get: %s\n", std::string(cross.status().message()).c_str());
}

}  // namespace
}  // namespace tandem::engine
