// SHA-256 of strings and files against the FIPS 180-4 / NIST known answers, and the file path's
// chunk loop at the sizes where it could go wrong (empty, one byte either side of a chunk).
#include "agentd/sha256.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
using tandem::testing::TempDir;
using tandem::testing::WriteTextFile;

// FIPS 180-4 examples (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf"): the empty message, "abc"
// (one block), the 448-bit message (its padding needs a second block) and one million 'a'.
constexpr const char* kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* k448Bit = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr const char* k448BitMessage = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
constexpr const char* kMillionA = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

// Bytes that differ from one position to the next, so a chunk read twice or skipped changes the hash.
std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 + (i >> 13));
  return s;
}

TEST(Sha256Test, StringsMatchTheNistAnswers) {
  EXPECT_EQ(Sha256Hex(""), kEmpty);
  EXPECT_EQ(Sha256Hex("abc"), kAbc);
  EXPECT_EQ(Sha256Hex(k448BitMessage), k448Bit);
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')), kMillionA);
}

TEST(Sha256Test, FilesMatchTheNistAnswers) {
  TempDir tmp;
  const std::vector<std::pair<std::string, const char*>> cases = {
      {"", kEmpty}, {"abc", kAbc}, {k448BitMessage, k448Bit}, {std::string(1000000, 'a'), kMillionA}};
  for (const auto& [content, want] : cases) {
    WriteTextFile(tmp / "f", content);
    uint64_t n = 0;
    auto sha = Sha256File(tmp / "f", &n);
    ASSERT_TRUE(sha.ok()) << sha.status();
    EXPECT_EQ(*sha, want) << content.size() << " bytes";
    EXPECT_EQ(n, content.size());
  }
}

// The file is read in kHashChunkBytes pieces: sizes just under, at and over one or two chunks
// give the in-memory hash, every byte is counted once, and progress moves by whole chunks.
TEST(Sha256Test, FileChunkEdges) {
  TempDir tmp;
  const std::string data = Pattern(2 * kHashChunkBytes + 12345);
  for (size_t size : {size_t{1}, kHashChunkBytes - 1, kHashChunkBytes, kHashChunkBytes + 1, 2 * kHashChunkBytes,
                      data.size()}) {
    const std::string content = data.substr(0, size);
    WriteTextFile(tmp / "f", content);
    std::vector<uint64_t> chunks;
    uint64_t n = 0;
    auto sha = Sha256File(tmp / "f", &n, [&](uint64_t c) { chunks.push_back(c); });
    ASSERT_TRUE(sha.ok()) << sha.status();
    EXPECT_EQ(*sha, Sha256Hex(content)) << size;
    EXPECT_EQ(n, size);
    uint64_t sum = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      sum += chunks[i];
      if (i + 1 < chunks.size()) {
        EXPECT_EQ(chunks[i], kHashChunkBytes) << "size " << size << " chunk " << i;
      }
    }
    EXPECT_EQ(sum, size);
    EXPECT_EQ(chunks.size(), (size + kHashChunkBytes - 1) / kHashChunkBytes) << size;
  }
}

TEST(Sha256Test, FileErrorsAreStatuses) {
  TempDir tmp;
  auto missing = Sha256File(tmp / "missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_NE(missing.status().message().find("missing"), std::string_view::npos);
  // A folder opens but cannot be read.
  std::filesystem::create_directories(tmp / "dir");
  EXPECT_EQ(Sha256File(tmp / "dir").status().code(), absl::StatusCode::kDataLoss);

  WriteTextFile(tmp / "f", Pattern(kHashChunkBytes + 1));
  std::atomic<bool> cancel{true};
  uint64_t n = 7;
  EXPECT_EQ(Sha256File(tmp / "f", &n, nullptr, &cancel).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(n, 7u) << "a cancelled hash reports no byte count";
  // Cancelled between chunks: the first chunk was read, the second never is.
  cancel = false;
  int calls = 0;
  auto partial = Sha256File(tmp / "f", nullptr, [&](uint64_t) { ++calls; cancel = true; }, &cancel);
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tandem::agentd
