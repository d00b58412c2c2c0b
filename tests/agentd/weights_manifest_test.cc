// Weights manifest: digests, order, symlinks, cache, parallelism.
#include "agentd/weights_manifest.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <fcntl.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "agentd/sha256.h"
#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
namespace fs = std::filesystem;
using tandem::testing::TempDir;
using tandem::testing::ReadTextFile;
using tandem::testing::WriteTextFile;

// Known answers from FIPS 180-2 (appendix B.1) and the empty message.
constexpr const char* kSha256Abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kSha256Empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// sha256 of one million 'a' (FIPS 180-2 appendix B.3): spans no chunk edge but many blocks.
constexpr const char* kSha256MillionA = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

void MakeModel(const TempDir& tmp) {
  WriteTextFile(tmp / "model/config.json", "abc");
  WriteTextFile(tmp / "model/tokenizer.json", "");
  WriteTextFile(tmp / "model/b/weights-2.safetensors", std::string(1000000, 'a'));
  WriteTextFile(tmp / "model/a/weights-1.safetensors", "hello\n");
  WriteTextFile(tmp / "model/.cache/huggingface/download/x.metadata", "per-download timestamps");
  WriteTextFile(tmp / "blobs/blob1", "abc");
  fs::create_symlink("../blobs/blob1", tmp / "model/linked.bin");
}

void PrintManifest(const v1::WeightsManifest& m) {
  for (const auto& f : m.files()) {
    std::cout << "  " << f.sha256() << " " << f.size() << " " << f.path()
              << (f.symlink_target().empty() ? "" : " -> " + f.symlink_target()) << (f.cached() ? " (cached)" : "")
              << (f.error().empty() ? "" : " ERROR " + f.error()) << "\n";
  }
}

// After one file of MakeModel's changed: config.json was hashed again, to `sha256`, and every
// other file came from the cache.
void ExpectOnlyConfigRehashed(const v1::WeightsManifest& m, const std::string& sha256) {
  PrintManifest(m);
  for (const auto& f : m.files()) {
    if (f.path() == "config.json") {
      EXPECT_FALSE(f.cached()) << "the changed file was served from the cache";
      EXPECT_EQ(f.sha256(), sha256);
    } else {
      EXPECT_TRUE(f.cached()) << f.path();
    }
  }
}

TEST(WeightsManifestTest, SortedRecursiveWithSymlinksResolved) {
  TempDir tmp;
  MakeModel(tmp);
  WeightsHasher hasher("");
  auto m = hasher.Hash(tmp / "model", {});
  ASSERT_TRUE(m.ok()) << m.status();
  PrintManifest(*m);
  std::vector<std::string> paths;
  for (const auto& f : m->files()) paths.push_back(f.path());
  // .cache is skipped; sorted by '/'-separated path.
  EXPECT_EQ(paths, (std::vector<std::string>{"a/weights-1.safetensors", "b/weights-2.safetensors", "config.json",
                                             "linked.bin", "tokenizer.json"}));
  EXPECT_EQ(m->files(1).sha256(), kSha256MillionA);
  EXPECT_EQ(m->files(1).size(), 1000000u);
  EXPECT_EQ(m->files(2).sha256(), kSha256Abc);
  EXPECT_EQ(m->files(3).sha256(), kSha256Abc);
  EXPECT_EQ(m->files(3).symlink_target(), fs::canonical(tmp / "blobs/blob1").string());
  EXPECT_EQ(m->files(2).symlink_target(), "");
  EXPECT_EQ(m->files(4).sha256(), kSha256Empty);
  EXPECT_EQ(m->total_bytes(), 3u + 0 + 1000000 + 6 + 3);
  for (const auto& f : m->files()) EXPECT_FALSE(f.cached());
  EXPECT_GT(m->hashed_bytes_per_second(), 0);
}

TEST(WeightsManifestTest, DanglingSymlinkIsReportedNotFatal) {
  TempDir tmp;
  WriteTextFile(tmp / "model/config.json", "abc");
  fs::create_symlink("../nowhere/x.safetensors", tmp / "model/x.safetensors");
  auto m = WeightsHasher("").Hash(tmp / "model", {});
  ASSERT_TRUE(m.ok()) << m.status();
  PrintManifest(*m);
  ASSERT_EQ(m->files_size(), 2);
  EXPECT_EQ(m->files(1).path(), "x.safetensors");
  EXPECT_NE(m->files(1).error().find("dangling"), std::string::npos);
}

TEST(WeightsManifestTest, MissingFolderIsNotFound) {
  TempDir tmp;
  auto m = WeightsHasher("").Hash(tmp / "nope", {});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
}

TEST(WeightsManifestTest, CacheHitOnRepeatAndInvalidatedByMtime) {
  TempDir tmp;
  MakeModel(tmp);
  WeightsHasher hasher(tmp / "state");
  auto first = hasher.Hash(tmp / "model", {});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(fs::exists(hasher.cache_path()));

  // A new hasher (a restarted agent) reads the cache file.
  WeightsHasher restarted(tmp / "state");
  auto second = restarted.Hash(tmp / "model", {});
  ASSERT_TRUE(second.ok());
  PrintManifest(*second);
  ASSERT_EQ(second->files_size(), first->files_size());
  for (int i = 0; i < second->files_size(); ++i) {
    EXPECT_TRUE(second->files(i).cached()) << second->files(i).path();
    EXPECT_EQ(second->files(i).sha256(), first->files(i).sha256());
  }
  EXPECT_EQ(second->hashed_bytes_per_second(), 0.0);

  // Same size, new content, new mtime: must be re-hashed.
  const std::string changed = tmp / "model/config.json";
  WriteTextFile(changed, "abd");
  struct timeval times[2];
  gettimeofday(&times[0], nullptr);
  times[0].tv_sec += 10;
  times[1] = times[0];
  ASSERT_EQ(utimes(changed.c_str(), times), 0);
  auto third = restarted.Hash(tmp / "model", {});
  ASSERT_TRUE(third.ok());
  ExpectOnlyConfigRehashed(*third, Sha256Hex("abd"));
}

// The attack of issue 12: flip a byte, then set atime and mtime back to what they were. Size and
// mtime match the cache; ctime does not (utime itself moves it), so the file is hashed again.
TEST(WeightsManifestTest, ByteFlippedWithMtimeRestoredIsRehashed) {
  TempDir tmp;
  MakeModel(tmp);
  WeightsHasher hasher(tmp / "state");
  auto first = hasher.Hash(tmp / "model", {});
  ASSERT_TRUE(first.ok());
  const std::string target = tmp / "model/config.json";
  struct stat before {};
  ASSERT_EQ(stat(target.c_str(), &before), 0);
  std::string content = ReadTextFile(target);
  ASSERT_FALSE(content.empty());
  content[0] ^= 0x01;
  WriteTextFile(target, content);
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, target.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(stat(target.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

  auto second = hasher.Hash(tmp / "model", {});
  ASSERT_TRUE(second.ok());
  ExpectOnlyConfigRehashed(*second, Sha256Hex(content));
}

// A file replaced by another one (rename over it) with the same size and times is a new inode.
TEST(WeightsManifestTest, ReplacedFileIsRehashed) {
  TempDir tmp;
  MakeModel(tmp);
  WeightsHasher hasher(tmp / "state");
  ASSERT_TRUE(hasher.Hash(tmp / "model", {}).ok());
  const std::string target = tmp / "model/config.json";
  struct stat before {};
  ASSERT_EQ(stat(target.c_str(), &before), 0);
  std::string content = ReadTextFile(target);
  content[0] ^= 0x02;
  WriteTextFile(tmp / "replacement", content);
  ASSERT_EQ(rename((tmp / "replacement").c_str(), target.c_str()), 0);
  auto m = hasher.Hash(tmp / "model", {});
  ASSERT_TRUE(m.ok());
  ExpectOnlyConfigRehashed(*m, Sha256Hex(content));
}

TEST(WeightsManifestTest, UseCacheFalseReadsEveryByteAndRefreshesTheCache) {
  TempDir tmp;
  MakeModel(tmp);
  WeightsHasher hasher(tmp / "state");
  ASSERT_TRUE(hasher.Hash(tmp / "model", {}).ok());
  HashOptions full;
  full.use_cache = false;
  auto m = hasher.Hash(tmp / "model", full);
  ASSERT_TRUE(m.ok());
  for (const auto& f : m->files()) EXPECT_FALSE(f.cached()) << f.path();
  EXPECT_GT(m->hashed_bytes_per_second(), 0.0);
  auto again = hasher.Hash(tmp / "model", {});
  ASSERT_TRUE(again.ok());
  for (const auto& f : again->files()) EXPECT_TRUE(f.cached()) << f.path();
}

// A cache written by the size + mtime format is not trusted.
TEST(WeightsManifestTest, OldFormatCacheIsIgnored) {
  TempDir tmp;
  MakeModel(tmp);
  const std::string data = fs::canonical(tmp / "model/config.json").string();
  WriteTextFile(tmp / "state/weights-cache.json",
                "{\"format\": 1, \"files\": {\"" + data + "\": {\"size\": 3, \"mtime_ns\": 0, \"sha256\": \"00\"}}}");
  auto m = WeightsHasher(tmp / "state").Hash(tmp / "model", {});
  ASSERT_TRUE(m.ok());
  for (const auto& f : m->files()) EXPECT_FALSE(f.cached()) << f.path();
}

TEST(WeightsManifestTest, CorruptCacheIsIgnored) {
  TempDir tmp;
  MakeModel(tmp);
  WriteTextFile(tmp / "state/weights-cache.json", "{ not json");
  auto m = WeightsHasher(tmp / "state").Hash(tmp / "model", {});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->files(2).sha256(), kSha256Abc);
  EXPECT_FALSE(m->files(2).cached());
}

TEST(WeightsManifestTest, ParallelEqualsSerial) {
  TempDir tmp;
  for (int i = 0; i < 24; ++i) {
    std::string content(static_cast<size_t>(i) * 100003 + 7, static_cast<char>('A' + i));
    WriteTextFile(tmp / ("model/shard-" + std::to_string(i) + ".bin"), content);
  }
  HashOptions serial, parallel;
  serial.threads = 1;
  parallel.threads = 8;
  auto a = WeightsHasher("").Hash(tmp / "model", serial);
  auto b = WeightsHasher("").Hash(tmp / "model", parallel);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->files_size(), 24);
  ASSERT_EQ(b->files_size(), 24);
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(a->files(i).path(), b->files(i).path());
    EXPECT_EQ(a->files(i).sha256(), b->files(i).sha256());
  }
  std::cout << "  serial " << a->seconds() << " s, 8 threads " << b->seconds() << " s\n";
}

TEST(WeightsManifestTest, ProgressReachesTheTotal) {
  TempDir tmp;
  WriteTextFile(tmp / "model/big.bin", std::string(10u << 20, 'z'));
  WriteTextFile(tmp / "model/small.bin", "x");
  HashOptions o;
  o.progress_interval = std::chrono::milliseconds(1);
  std::vector<v1::HashProgress> seen;
  o.on_progress = [&](const v1::HashProgress& p) { seen.push_back(p); };
  auto m = WeightsHasher("").Hash(tmp / "model", o);
  ASSERT_TRUE(m.ok());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().files_done(), 2u);
  EXPECT_EQ(seen.back().bytes_done(), (10u << 20) + 1);
  EXPECT_EQ(seen.back().bytes_total(), (10u << 20) + 1);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].bytes_done(), seen[i - 1].bytes_done());
}

TEST(WeightsManifestTest, CancelStopsHashing) {
  TempDir tmp;
  WriteTextFile(tmp / "model/big.bin", std::string(64u << 20, 'z'));
  HashOptions o;
  o.progress_interval = std::chrono::milliseconds(1);
  o.cancelled = [] { return true; };
  auto m = WeightsHasher("").Hash(tmp / "model", o);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace tandem::agentd
