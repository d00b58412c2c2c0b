// Pre-tokenizers on a tiny hand-made tokenizer: ByteLevel with its regex and prefix space, and
// each behavior of Split (removed, isolated, merged with the previous or the next piece).
// Driven through Tokenizer, which runs the pre-tokenizer before BPE.
#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tiny_tokenizer.h"

namespace tandem::tokenizer {
namespace {

using nlohmann::json;
using testing::Load;
using testing::TinyTokenizer;

TEST(PreTokenizerTest, ByteLevelRegexAndPrefixSpace) {
  json j = TinyTokenizer({{" ", "h"}, {" h", "i"}});
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  auto t = Load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->Encode("hi hi"), (std::vector<int32_t>{257, 257}));
}

TEST(PreTokenizerTest, SplitBehaviors) {
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"Removed", {'a', 'b'}},
      {"Isolated", {'a', '-', 'b'}},
      {"MergedWithPrevious", {256, 'b'}},  // "a-" then "b"
      {"MergedWithNext", {'a', 257}},      // "a" then "-b"
  };
  for (const auto& [behavior, want] : cases) {
    json j = TinyTokenizer({{"a", "-"}, {"-", "b"}});
    j["pre_tokenizer"]["pretokenizers"][0] = {
        {"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", false}};
    auto t = Load(j);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->Encode("a-b"), want) << behavior;
  }
}

}  // namespace
}  // namespace tandem::tokenizer
