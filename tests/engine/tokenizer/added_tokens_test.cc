// Added tokens on a tiny hand-made tokenizer: special, lstrip/rstrip, single_word and normalized
// flags decide where a token matches; the longest match wins; decoding can skip special tokens.
// Driven through Tokenizer, which owns the AddedTokenMatcher.
#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tiny_tokenizer.h"

namespace tandem::tokenizer {
namespace {

using nlohmann::json;
using testing::Load;
using testing::TinyTokenizer;

TEST(AddedTokensTest, FlagsControlMatching) {
  json j = TinyTokenizer({});
  j["added_tokens"] = json::array({
      {{"id", 300}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
      {{"id", 301}, {"content", "<sep>"}, {"special", true}, {"lstrip", true}, {"rstrip", true},
       {"normalized", false}},
      {{"id", 302}, {"content", "cat"}, {"special", false}, {"single_word", true}, {"normalized", false}},
      {{"id", 303}, {"content", "<s>x"}, {"special", false}, {"normalized", false}},
      {{"id", 304}, {"content", "\xC3\xA9t\xC3\xA9"}, {"special", false}, {"normalized", true}},
  });
  auto t = Load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->Encode("<s>"), (std::vector<int32_t>{300}));
  EXPECT_EQ(t->Encode("<s>x"), (std::vector<int32_t>{303}));  // longest match wins
  EXPECT_EQ(t->Encode("a  <sep>  b"), (std::vector<int32_t>{'a', 301, 'b'}));  // spaces swallowed
  EXPECT_EQ(t->Encode("cat"), (std::vector<int32_t>{302}));
  EXPECT_EQ(t->Encode("a cat."), (std::vector<int32_t>{'a', ' ', 302, '.'}));
  EXPECT_EQ(t->Encode("cats"), (std::vector<int32_t>{'c', 'a', 't', 's'}));  // inside a word
  // Normalized token: decomposed "été" in the text is composed first, then matched.
  EXPECT_EQ(t->Encode("e\xCC\x81te\xCC\x81"), (std::vector<int32_t>{304}));
  EXPECT_EQ(t->Decode({300, 'a', 301}), "<s>a<sep>");
  EXPECT_EQ(t->Decode({300, 'a', 301}, /*skip_special_tokens=*/true), "a");
  EXPECT_EQ(t->vocab_size(), 305);
}

}  // namespace
}  // namespace tandem::tokenizer
