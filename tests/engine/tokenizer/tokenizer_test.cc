// Tokenizer end to end: the real Qwen3 tokenizer against the reference encodings of
// @huggingface/transformers (tests/data/qwen3-tokenizer/encodings.json): ids, chat renderings,
// round trips, streaming; and Tokenizer::EncodeAtMost, which under its budget equals Encode
// exactly (every reference text, and a few hundred KB of mixed text), says no one token over it,
// and refuses an over-long input after a small part of the work a full encoding takes. These
// cross every part of engine/tokenizer (loader, pre-tokenizer, added tokens, BPE, UTF-8, chat
// template), so they sit with the entry point they drive; each part's own cases are in its
// <part>_test.cc on tiny hand-made tokenizers.
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace tandem::tokenizer {
namespace {

using testing::ThreadCpuSeconds;
std::string TestdataDir() { return testing::Qwen3TokenizerDir(); }

std::string Head(const std::vector<int32_t>& ids, size_t n = 6) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size() && i < n; ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  if (ids.size() > n) s += ", ...";
  return s + "] (" + std::to_string(ids.size()) + " ids)";
}

class Qwen3TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuSeconds();
    auto t = Tokenizer::LoadFromDir(TestdataDir());
    load_cpu_seconds_ = ThreadCpuSeconds() - cpu_start;
    load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = t->release();
    refs_ = new nlohmann::json(nlohmann::json::parse(tandem::testing::ReadTextFile(TestdataDir() + "/encodings.json")));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete refs_;
  }
  static std::vector<std::string> CorpusTexts() {
    std::vector<std::string> texts;
    for (const auto& c : (*refs_)["cases"]) texts.push_back(c["text"].get<std::string>());
    return texts;
  }
  static Tokenizer* tokenizer_;
  static nlohmann::json* refs_;
  static double load_seconds_, load_cpu_seconds_;
};
Tokenizer* Qwen3TokenizerTest::tokenizer_ = nullptr;
nlohmann::json* Qwen3TokenizerTest::refs_ = nullptr;
double Qwen3TokenizerTest::load_seconds_ = 0;
double Qwen3TokenizerTest::load_cpu_seconds_ = 0;

TEST_F(Qwen3TokenizerTest, LoadsQuicklyWithExpectedVocabulary) {
  std::printf("loaded tokenizer.json in %.3f s wall, %.3f s CPU\n", load_seconds_,
              load_cpu_seconds_);
  EXPECT_LT(load_cpu_seconds_, 1.0);
  EXPECT_EQ(tokenizer_->vocab_size(), 151669);
  EXPECT_EQ(tokenizer_->eos_token(), "<|im_end|>");
  EXPECT_EQ(tokenizer_->eos_token_id(), 151645);
  EXPECT_EQ(tokenizer_->pad_token_id(), 151643);
  EXPECT_EQ(tokenizer_->TokenId("<|im_start|>"), 151644);
  EXPECT_EQ(tokenizer_->TokenId("<think>"), 151667);
  EXPECT_EQ(tokenizer_->TokenId("Hello"), 9707);
  EXPECT_EQ(tokenizer_->TokenId("Ġ"), 220);  // vocabulary spelling of " "
  EXPECT_FALSE(tokenizer_->TokenId("<|no_such_token|>").has_value());
  EXPECT_TRUE(tokenizer_->IsSpecial(151645));
  EXPECT_FALSE(tokenizer_->IsSpecial(151667));  // <think> is added but not special
  EXPECT_EQ(tokenizer_->special_token_ids().size(), 14u);
  EXPECT_FALSE(tokenizer_->chat_template().empty());
}

TEST_F(Qwen3TokenizerTest, EncodesEveryReferenceCaseExactly) {
  size_t compared = 0, total_ids = 0;
  for (const auto& c : (*refs_)["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tokenizer_->Encode(text);
    std::printf("case %2zu: %-40.40s ref %s\n", compared, nlohmann::json(text).dump().c_str(),
                Head(want).c_str());
    EXPECT_EQ(got, want) << "text " << nlohmann::json(text).dump() << "\n got " << Head(got, 64)
                         << "\nwant " << Head(want, 64);
    ++compared;
    total_ids += want.size();
  }
  std::printf("compared %zu cases, %zu reference ids\n", compared, total_ids);
  EXPECT_EQ(compared, 26u);
}

TEST_F(Qwen3TokenizerTest, RendersEveryReferenceChatExactly) {
  size_t compared = 0;
  for (const auto& c : (*refs_)["chat"]) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) {
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>(), {}, {}});
    }
    ChatTemplateOptions options;
    options.add_generation_prompt = true;
    EXPECT_EQ(ApplyChatTemplate(messages, options), c["text"].get<std::string>());
    options.enable_thinking = false;
    EXPECT_EQ(ApplyChatTemplate(messages, options), c["text_nothink"].get<std::string>());
    // The rendered text encodes with the special tokens as single ids.
    const auto ids = tokenizer_->Encode(c["text_nothink"].get<std::string>());
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 151644);
    EXPECT_EQ(tokenizer_->Decode(ids), c["text_nothink"].get<std::string>());
    if (c.contains("ids")) {
      EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>());
    }
    std::printf("chat %zu: %zu messages, %zu chars, encoded %s\n", compared, messages.size(),
                c["text_nothink"].get<std::string>().size(), Head(ids).c_str());
    compared += 2;
  }
  std::printf("compared %zu chat renderings\n", compared);
  EXPECT_EQ(compared, 6u);
}

TEST_F(Qwen3TokenizerTest, DecodeOfEncodeIsNfcOfTheText) {
  size_t compared = 0;
  for (const std::string& text : CorpusTexts()) {
    auto nfc = Normalize(text, NormalForm::kNFC);
    ASSERT_TRUE(nfc.ok());
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text)), *nfc) << text;
    ++compared;
  }
  // Decomposed input comes back composed: "e" + U+0301 -> "é".
  EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode("caf\x65\xCC\x81")), "caf\xC3\xA9");
  std::printf("round-tripped %zu texts\n", compared);
}

TEST_F(Qwen3TokenizerTest, StreamDecoderMatchesDecodeAndYieldsOnlyValidUtf8) {
  size_t chunks = 0, held = 0;
  for (const std::string& text : CorpusTexts()) {
    const auto ids = tokenizer_->Encode(text);
    StreamDecoder stream(*tokenizer_);
    std::string joined;
    for (int32_t id : ids) {
      const std::string chunk = stream.Push(id);
      EXPECT_TRUE(IsValidUtf8(chunk)) << "chunk of " << text;
      if (chunk.empty()) ++held;
      joined += chunk;
      ++chunks;
    }
    const std::string rest = stream.Flush();
    EXPECT_EQ(rest, "");
    joined += rest;
    EXPECT_EQ(joined, tokenizer_->Decode(ids)) << text;
  }
  // Tokens that split a character: "🚀" is ids 11162 248 222 (bytes F0 9F / 9A / 80).
  StreamDecoder stream(*tokenizer_);
  EXPECT_EQ(stream.Push(37523), "emoji");
  EXPECT_EQ(stream.Push(11162), " ");  // the space comes out, the lead bytes wait
  EXPECT_EQ(stream.Push(248), "");
  EXPECT_EQ(stream.Push(222), "\xF0\x9F\x9A\x80");
  EXPECT_EQ(stream.Push(11162), " ");
  EXPECT_EQ(stream.Flush(), "\xEF\xBF\xBD");  // an unfinished character ends as U+FFFD
  std::printf("streamed %zu ids, %zu pushes held bytes back\n", chunks, held);
  EXPECT_GT(held, 0u);
}

TEST_F(Qwen3TokenizerTest, SkipsSpecialTokensOnRequest) {
  const auto ids = tokenizer_->Encode("<|im_start|>user\nhi<|im_end|><think>");
  EXPECT_EQ(tokenizer_->Decode(ids, /*skip_special_tokens=*/true), "user\nhi<think>");
  StreamDecoder stream(*tokenizer_, /*skip_special_tokens=*/true);
  std::string joined;
  for (int32_t id : ids) joined += stream.Push(id);
  EXPECT_EQ(joined, "user\nhi<think>");
}

TEST_F(Qwen3TokenizerTest, SplitsSpecialTokensInText) {
  EXPECT_EQ(tokenizer_->Encode("<|im_start|>user\nhi<|im_end|>"),
            (std::vector<int32_t>{151644, 872, 198, 6023, 151645}));
  // Adjacent special tokens, and text glued to them on both sides.
  EXPECT_EQ(tokenizer_->Encode("<|im_end|><|im_start|>"), (std::vector<int32_t>{151645, 151644}));
  auto ids = tokenizer_->Encode("a<|endoftext|>b");
  EXPECT_EQ(ids, (std::vector<int32_t>{tokenizer_->Encode("a")[0], 151643,
                                       tokenizer_->Encode("b")[0]}));
  // A broken special token is ordinary text.
  ids = tokenizer_->Encode("<|im_start|");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151644), 0);
  EXPECT_EQ(tokenizer_->Decode(ids), "<|im_start|");
  // Non-special added tokens are matched too.
  EXPECT_EQ(tokenizer_->Encode("<think>\n\n</think>\n\n"),
            (std::vector<int32_t>{151667, 271, 151668, 271}));
}

TEST_F(Qwen3TokenizerTest, InvalidUtf8IsReplacedBeforeEncoding) {
  const std::string replacement = "\xEF\xBF\xBD";
  const auto want = tokenizer_->Encode("a" + replacement + "b");
  EXPECT_EQ(tokenizer_->Encode("a\xFF" "b"), want);
  EXPECT_EQ(tokenizer_->Encode("a\xC3" "b"), want);  // truncated 2-byte sequence
  EXPECT_EQ(tokenizer_->Encode("a\xED\xA0\x80" "b"),  // a surrogate: three maximal subparts
            tokenizer_->Encode("a" + replacement + replacement + replacement + "b"));
  EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode("\xF0\x9F\x9A")), replacement);
  // Decoding a lone byte token never yields invalid UTF-8.
  EXPECT_EQ(tokenizer_->Decode({248}), replacement);
  EXPECT_EQ(tokenizer_->Decode({-1, 999999999}), "");  // unknown ids are skipped
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise.push_back(static_cast<char>((i * 2654435761u) >> 13));
  EXPECT_TRUE(IsValidUtf8(tokenizer_->Decode(tokenizer_->Encode(noise))));
}

TEST_F(Qwen3TokenizerTest, EncodesLongInputsWithoutPathology) {
  // A long run of one letter is one pre-token word: the merge heap keeps it near-linear.
  const std::string long_word(200000, 'a');
  // CPU time of this thread, as the load budget: the bound is about our code, not about how
  // many other jobs share the machine.
  const double start = ThreadCpuSeconds();
  const auto ids = tokenizer_->Encode(long_word);
  const double s = ThreadCpuSeconds() - start;
  std::printf("200000 x 'a' -> %zu ids in %.3f s CPU\n", ids.size(), s);
  EXPECT_EQ(tokenizer_->Decode(ids), long_word);
  EXPECT_LT(s, 5.0);
  const std::string spaces(100000, ' ');
  EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(spaces)), spaces);
}

// EncodeAtMost on the same tokenizer and reference texts.
class BoundedEncodeTest : public Qwen3TokenizerTest {
 protected:
  // The reference texts interleaved with varied words until `bytes` long (as tokenizer_bench).
  static std::string MixedText(size_t bytes) {
    const char* words[] = {"tensor", "parallel", "expert", "router", "kernel", "latency", "the",
                           "of", "GPU", "all-reduce", "cache", "分布式", "推理", "модель", "schnell"};
    const std::vector<std::string> texts = CorpusTexts();
    std::string text;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; text.size() < bytes; ++i) {
      text += texts[i % texts.size()];
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
};

TEST_F(BoundedEncodeTest, EqualsEncodeUnderTheBudgetAndRefusesOneOver) {
  const std::vector<std::string> texts = CorpusTexts();
  ASSERT_FALSE(texts.empty());
  size_t checked = 0;
  for (const std::string& text : texts) {
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
