// Tokenizer::EncodeAtMost with the real Qwen3 tokenizer: under its budget it equals Encode
// exactly (every reference text, and a few hundred KB of mixed text), one token over it says no,
// and an over-long input is refused after a small part of the work a full encoding takes.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace tandem::tokenizer {
namespace {

using testing::ThreadCpuSeconds;
std::string TestdataDir() { return testing::Qwen3TokenizerDir(); }

class BoundedEncodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = Tokenizer::LoadFromDir(TestdataDir());
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = t->release();
    std::ifstream in(TestdataDir() + "/encodings.json");
    std::stringstream ss;
    ss << in.rdbuf();
    const auto refs = nlohmann::json::parse(ss.str());
    texts_ = new std::vector<std::string>();
    for (const auto& c : refs["cases"]) texts_->push_back(c["text"]);
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete texts_;
  }
  // The reference texts interleaved with varied words until `bytes` long (as tokenizer_bench).
  static std::string MixedText(size_t bytes) {
    const char* words[] = {"tensor", "parallel", "expert", "router", "kernel", "latency", "the",
                           "of", "GPU", "all-reduce", "cache", "分布式", "推理", "модель", "schnell"};
    std::string text;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; text.size() < bytes; ++i) {
      text += (*texts_)[i % texts_->size()];
      for (int w = 0; w < 12; ++w) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        text += ' ';
        text += words[x % (sizeof(words) / sizeof(words[0]))];
        if (x % 5 == 0) text += std::to_string(x % 100000);
      }
      text += (x % 3 == 0) ? "\n" : ". ";
    }
    return text;
  }
  static Tokenizer* tokenizer_;
  static std::vector<std::string>* texts_;
};
Tokenizer* BoundedEncodeTest::tokenizer_ = nullptr;
std::vector<std::string>* BoundedEncodeTest::texts_ = nullptr;

TEST_F(BoundedEncodeTest, EqualsEncodeUnderTheBudgetAndRefusesOneOver) {
  ASSERT_FALSE(texts_->empty());
  size_t checked = 0;
  for (const std::string& text : *texts_) {
    const std::vector<int32_t> full = tokenizer_->Encode(text);
    for (size_t budget : {full.size(), full.size() + 1, full.size() + 1000}) {
      auto got = tokenizer_->EncodeAtMost(text, budget);
      ASSERT_TRUE(got.has_value()) << "budget " << budget << " for " << full.size() << " ids: " << text;
      EXPECT_EQ(*got, full) << text;
    }
    if (!full.empty()) {
      EXPECT_FALSE(tokenizer_->EncodeAtMost(text, full.size() - 1).has_value()) << text;
    }
    ++checked;
  }
  const std::string mixed = MixedText(300 * 1024);
  const std::vector<int32_t> full = tokenizer_->Encode(mixed);
  auto got = tokenizer_->EncodeAtMost(mixed, full.size());
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, full);
  EXPECT_FALSE(tokenizer_->EncodeAtMost(mixed, full.size() - 1).has_value());
  std::cout << checked << " reference texts and " << mixed.size() << " bytes of mixed text (" << full.size()
            << " ids): EncodeAtMost == Encode at the exact budget, nullopt one below\n";
}

// A 4 MiB prompt against a 4096-token context: refused after about 4096 tokens of work.
TEST_F(BoundedEncodeTest, StopsEarlyOnAnOverLongText) {
  const std::string big = MixedText(4 << 20);
  double t0 = ThreadCpuSeconds();
  const size_t full_ids = tokenizer_->Encode(big).size();
  const double full_s = ThreadCpuSeconds() - t0;
  t0 = ThreadCpuSeconds();
  EXPECT_FALSE(tokenizer_->EncodeAtMost(big, 4096).has_value());
  const double bounded_s = ThreadCpuSeconds() - t0;
  std::cout << big.size() << " bytes: Encode " << full_ids << " ids in " << full_s * 1e3 << " ms CPU; EncodeAtMost(4096) "
            << bounded_s * 1e3 << " ms CPU\n";
  EXPECT_LT(bounded_s, full_s / 4);
}

// One enormous word (no spaces): a full encoding merges every byte (seconds, gigabytes for
// 60 MB); the bounded one refuses it from its length alone.
TEST_F(BoundedEncodeTest, RefusesAHugeWordWithoutMergingIt) {
  const std::string word(4 << 20, 'a');
  double t0 = ThreadCpuSeconds();
  EXPECT_FALSE(tokenizer_->EncodeAtMost(word, 4096).has_value());
  const double bounded_s = ThreadCpuSeconds() - t0;
  t0 = ThreadCpuSeconds();
  const size_t full_ids = tokenizer_->Encode(word).size();
  const double full_s = ThreadCpuSeconds() - t0;
  std::cout << "4 MiB of 'a': Encode " << full_ids << " ids in " << full_s * 1e3 << " ms CPU; EncodeAtMost(4096) "
            << bounded_s * 1e3 << " ms CPU\n";
  EXPECT_GT(full_ids, 4096u);
  EXPECT_LT(bounded_s, full_s / 4);
  // Just under the bound: a word that might fit is merged, and the answer is exact.
  const std::string fits(1000, 'a');
  auto got = tokenizer_->EncodeAtMost(fits, 4096);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, tokenizer_->Encode(fits));
}

}  // namespace
}  // namespace tandem::tokenizer
