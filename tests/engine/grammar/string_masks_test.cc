// The bucketed mask cache entries of JSON string content (string_masks.h) against the walk they
// replace, bit for bit: every string position of bounded and unbounded strings, over a small
// vocabulary of awkward tokens (escapes, cut and broken UTF-8, quotes and control bytes inside)
// and over the real Qwen3 vocabulary; which rules take the path and which must not.
#include "engine/grammar/string_masks.h"

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "engine/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/common/test_util.h"
#include "tests/engine/grammar/grammar_test_util.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const CompiledGrammar> Schema(const std::string& schema, std::shared_ptr<const TokenVocabulary> vocab) {
  GrammarBuilder b;
  absl::StatusOr<RuleId> root = AddJsonSchema(Json::parse(schema), b, "root");
  EXPECT_TRUE(root.ok()) << root.status();
  return root.ok() ? CompileOrDie(b, *root, std::move(vocab)) : nullptr;
}

// Every string-content position of `g` (every `stride`-th): MaskAt (the buckets, on a fresh
// grammar, entries shared between positions as a walk through the string would share them)
// equals the walk. Returns how many were compared.
int CompareStringPositions(const CompiledGrammar& g, int stride = 1) {
  const int32_t positions = static_cast<int32_t>(g.grammar().elements.size());
  for (int32_t pos = 0; pos < positions; ++pos) {
    if (g.IsStringContent(pos)) g.MaskAt(pos);
  }
  int compared = 0, seen = 0;
  for (int32_t pos = 0; pos < positions; ++pos) {
    if (!g.IsStringContent(pos) || seen++ % stride != 0) continue;
    const PositionMask& fast = g.MaskAt(pos);
    const PositionMask walk = g.WalkMask(pos);
    std::vector<uint64_t> fast_bits(walk.accepted.size(), 0);
    fast.AddAcceptedTo(&fast_bits);  // a stored entry may keep few tokens as ids
    int differ = 0;
    for (size_t w = 0; w < walk.accepted.size(); ++w) differ += __builtin_popcountll(walk.accepted[w] ^ fast_bits[w]);
    EXPECT_EQ(differ, 0) << "accepted tokens differ at position " << pos;
    EXPECT_EQ(fast.uncertain, walk.uncertain) << "uncertain tokens differ at position " << pos;
    // Where each uncertain token leaves the string: at a byte that may follow it (the closing
    // quote, or the control byte of OtherFollowersAndRefusedRules), never inside a character.
    EXPECT_EQ(fast.leave.size(), fast.uncertain.size());
    for (size_t i = 0; i < fast.leave.size() && i < fast.uncertain.size(); ++i) {
      const std::string_view t = g.vocab().sorted_bytes(fast.uncertain[i]);
      EXPECT_LT(static_cast<size_t>(fast.leave[i]), t.size());
      if (static_cast<size_t>(fast.leave[i]) >= t.size()) continue;
      EXPECT_TRUE(t[fast.leave[i]] == '"' || t[fast.leave[i]] == '\x01') << "\"" << t << "\" leaves at " << fast.leave[i];
    }
    ++compared;
  }
  return compared;
}

const std::vector<std::string> kAwkwardTokens = {
    "ab", "abc", "abcdefgh", "a\"", "\"", "\",", "\"}", "ab\"c", "a\"b", "\\", "\\n", "\\nx", "\\\"", "\\x",
    "\\u", "\\u00", "\\u00e9", "\\u00e9z", "\\u00g9", "0a1F", "1f\"", "e9\"}", "\xC3\xA9", "\xC3", "\xA9", "\xA9" "a",
    "\xA9\"", "\xE4\xB8", "\xB8\xAD", "\xB8\xAD" "a\"", "\xAD\xE4", "abc\x01", "a\x01", "\x01", "\x7F\"",
    "\xF0\x9F\x98", "\x9F\x98\x80\"", "\x80", "\xED\xA0\x80", "\xED\x9F\xBF", "\xC0\x80", "\xF4\x90\x80\x80",
    "\xF4\x8F\xBF\xBF", "\xE0\x9F\x80", "\xE0\xA0\x80" "ab", "\xC3\xB1\"x", "/\\/", "  ", "ab\\", "a\\u0"};

TEST(StringMasksTest, PiecesAreTheJsonCharactersAsAPrefixCode) {
  // ASCII, 2-byte, four 3-byte and three 4-byte UTF-8 ranges, a short escape, \u and 4 hex.
  const auto& pieces = JsonCharPieces();
  ASSERT_EQ(pieces.size(), 11u);
  EXPECT_EQ(pieces.front().size(), 1u);
  EXPECT_FALSE(pieces.front()[0].Has('"'));
  EXPECT_FALSE(pieces.front()[0].Has('\\'));
  EXPECT_FALSE(pieces.front()[0].Has(0x1F));
  EXPECT_EQ(pieces.back().size(), 6u);
}

TEST(StringMasksTest, StringPositionsEqualTheWalkOverAwkwardTokens) {
  auto vocab = ByteVocabulary(kAwkwardTokens);
  const char* const schemas[] = {
      R"({"type":"string"})",
      R"({"type":"string","maxLength":1})",
      R"({"type":"string","minLength":1,"maxLength":1})",
      R"({"type":"string","minLength":2,"maxLength":5})",
      R"({"type":"string","minLength":3})",
      R"({"type":"string","minLength":12,"maxLength":40})",
      R"({"type":"object","properties":{"k":{"type":"string","maxLength":3},"m":{}},"required":["k"]})",
      R"({"type":"array","items":{"type":"string","minLength":1,"maxLength":2},"maxItems":3})",
  };
  for (const char* schema : schemas) {
    auto g = Schema(schema, vocab);
    ASSERT_NE(g, nullptr);
    EXPECT_GT(CompareStringPositions(*g), 0) << schema << ": no string position took the bucket path";
  }
}

// Grammars not from a schema: a rule is only taken when no character's first byte may follow
// it, whatever else may (here a control byte, which starts no character).
TEST(StringMasksTest, OtherFollowersAndRefusedRules) {
  auto vocab = ByteVocabulary(kAwkwardTokens);
  {
    GrammarBuilder b;
    const RuleId root = b.AddRule("root");
    ASSERT_TRUE(b.Define(root, b.Seq({b.Literal("\""), b.Repeat(JsonStringChar(b), 2, 4), b.Bytes({{1, 1}}),
                                      b.Literal("z")}))
                    .ok());
    auto g = CompileOrDie(b, root, vocab);
    ASSERT_NE(g, nullptr);
    EXPECT_GT(CompareStringPositions(*g), 0);
    // "a\x01" ends the characters: after one more (two in all) it is taken, alone not.
    GrammarMatcher m(g);
    ASSERT_TRUE(m.AcceptBytes("\"x"));
    EXPECT_TRUE(m.AcceptBytes("a\x01"));
    GrammarMatcher short_one(g);
    ASSERT_TRUE(short_one.AcceptBytes("\""));
    EXPECT_FALSE(short_one.AcceptBytes("a\x01"));
  }
  {
    // 'a' may follow the characters: the rule is left to the walk, which stays exact.
    GrammarBuilder b;
    const RuleId root = b.AddRule("root");
    ASSERT_TRUE(b.Define(root, b.Seq({b.Literal("\""), b.Star(JsonStringChar(b)), b.Literal("a")})).ok());
    auto g = CompileOrDie(b, root, vocab);
    ASSERT_NE(g, nullptr);
    for (int32_t pos = 0; pos < static_cast<int32_t>(g->grammar().elements.size()); ++pos) {
      EXPECT_FALSE(g->IsStringContent(pos)) << pos;
    }
    EXPECT_TRUE(Matches(g, "\"ab\\na"));
    EXPECT_FALSE(Matches(g, "\"ab\"a"));
  }
}

// The real vocabulary: all 35 positions of an unbounded string and of a string of 1 or 2
// characters (a walk inside a string takes up to tens of milliseconds: 105 of them), then a
// sample of a long bounded string's, where most positions share their entries.
TEST(StringMasksTest, StringPositionsEqualTheWalkOverQwen3Vocabulary) {
  auto tok = tokenizer::Tokenizer::LoadFromDir(::tandem::testing::TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto vocab = TokenVocabulary::FromTokenizer(**tok, 151936, {*(*tok)->TokenId("<|im_end|>")});
  auto g = Schema(R"({"type":"object","properties":{"a":{"type":"string","minLength":1,"maxLength":2},
                      "b":{"type":"string"}},"required":["a","b"]})",
                  vocab);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(CompareStringPositions(*g), 105);
  auto long_string = Schema(R"({"type":"string","minLength":150,"maxLength":300})", vocab);
  ASSERT_NE(long_string, nullptr);
  EXPECT_EQ(CompareStringPositions(*long_string, 211), 50);
}

}  // namespace
}  // namespace tandem::grammar
