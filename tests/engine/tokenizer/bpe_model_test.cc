// Byte-level BPE on tiny hand-made tokenizers: merges apply by rank, not by position, and the
// two spellings of a merge in tokenizer.json ("a b" and ["a", "b"]) give the same encoding.
// Driven through Tokenizer, which owns the BpeModel.
#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tiny_tokenizer.h"

namespace tandem::tokenizer {
namespace {

using testing::Load;
using testing::TinyTokenizer;

TEST(BpeTest, MergesApplyByRankNotByPosition) {
  auto ab_first = Load(TinyTokenizer({{"a", "b"}, {"b", "c"}}));
  auto bc_first = Load(TinyTokenizer({{"b", "c"}, {"a", "b"}}));
  ASSERT_TRUE(ab_first && bc_first);
  EXPECT_EQ(ab_first->Encode("abc"), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(bc_first->Encode("abc"), (std::vector<int32_t>{'a', 256}));
  // Equal ranks: leftmost first ("aaa" -> "aa" + "a").
  auto aa = Load(TinyTokenizer({{"a", "a"}}));
  EXPECT_EQ(aa->Encode("aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(aa->Encode("aaaa"), (std::vector<int32_t>{256, 256}));
}

TEST(BpeTest, StringAndPairMergeSpellingsAgree) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
  auto pairs = Load(TinyTokenizer(merges, false));
  auto strings = Load(TinyTokenizer(merges, true));
  ASSERT_TRUE(pairs && strings);
  const auto ids = pairs->Encode("hello wow");
  EXPECT_EQ(ids, strings->Encode("hello wow"));
  // The pre-tokenizer isolates the space, so the " w" merge (260) never applies across it.
  EXPECT_EQ(ids, (std::vector<int32_t>{259, ' ', 'w', 'o', 'w'}));
  EXPECT_EQ(pairs->Decode(ids), "hello wow");
}

}  // namespace
}  // namespace tandem::tokenizer
