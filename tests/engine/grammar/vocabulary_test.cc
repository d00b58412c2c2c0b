// The vocabulary's sorted order and its blocks: block_end(rank, depth) is the first rank past
// the tokens sharing that many bytes, as a scan finds it.
#include "engine/grammar/vocabulary.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/grammar/grammar_test_util.h"

namespace tandem::grammar {
namespace {

TEST(VocabularyTest, BlockEndIsTheEndOfTheSharedPrefix) {
  auto v = ByteVocabulary({"ab", "abc", "abd", "abcd", "b", "ba", "\xC3\xA9", "\xC3\xA9t", "\xC3", "zzz", "zz"});
  const int32_t n = static_cast<int32_t>(v->sorted().size());
  int checked = 0;
  for (int32_t rank = 0; rank < n; ++rank) {
    const std::string_view t = v->sorted_bytes(rank);
    EXPECT_EQ(v->block_end(rank, 0), n);
    for (size_t depth = 1; depth <= t.size(); ++depth) {
      int32_t end = rank + 1;
      while (end < n && v->sorted_bytes(end).substr(0, depth) == t.substr(0, depth)) ++end;
      EXPECT_EQ(v->block_end(rank, depth), end) << "\"" << t << "\" depth " << depth;
      ++checked;
    }
  }
  // "a" starts a block of 5 ("a", "ab", "abc", "abcd", "abd").
  const int32_t a = v->rank('a');
  EXPECT_EQ(v->block_end(a, 1) - a, 5);
  EXPECT_GT(checked, n);
}

}  // namespace
}  // namespace tandem::grammar
