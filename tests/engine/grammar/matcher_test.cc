// The matcher's masks against brute force (every token tried by AcceptToken on a copy of the
// matcher) along random walks, over a small vocabulary of multi-byte tokens and over the real
// Qwen3 vocabulary; eos and termination; completing within a token budget.
#include "engine/grammar/matcher.h"

#include <random>

#include <gtest/gtest.h>

#include "engine/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/common/test_util.h"
#include "tests/engine/grammar/grammar_test_util.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

const char* const kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},"n":{"type":"integer"},
        "ok":{"type":"boolean"},"tags":{"type":"array","items":{"enum":["ab","a\"b"]},"maxItems":3}},
        "required":["name","n"]})",
    R"({"anyOf":[{"type":"number"},{"type":"array","items":{"$ref":"#"}}]})",
    R"({})",
};

std::shared_ptr<const CompiledGrammar> Schema(const char* schema, std::shared_ptr<const TokenVocabulary> vocab) {
  GrammarBuilder b;
  absl::StatusOr<RuleId> root = AddJsonSchema(Json::parse(schema), b, "root");
  EXPECT_TRUE(root.ok()) << root.status();
  return root.ok() ? CompileOrDie(b, *root, std::move(vocab)) : nullptr;
}

bool Bit(const std::vector<uint64_t>& mask, int32_t id) { return (mask[id >> 6] >> (id & 63)) & 1; }

// Along a walk of random allowed tokens, the mask equals what AcceptToken takes, token by token
// over `ids`. Returns the text walked.
std::string CheckWalk(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& ids, int steps,
                      uint64_t seed) {
  const TokenVocabulary& v = g->vocab();
  GrammarMatcher m(g);
  GrammarMatcher probe(g);  // the same tokens, never masked: cheap to copy (no recent masks)
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> mask;
  std::string text;
  for (int step = 0; step < steps && !m.IsTerminated(); ++step) {
    m.FillMask(&mask);
    std::vector<int32_t> allowed;
    for (int32_t id : ids) {
      GrammarMatcher copy = probe;
      const bool takes = copy.AcceptToken(id);
      EXPECT_EQ(Bit(mask, id), takes) << "token " << id << " \"" << v.bytes(id) << "\" after \"" << text << "\"";
      if (takes) allowed.push_back(id);
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "nothing allowed after \"" << text << "\"";
      break;
    }
    const int32_t pick = allowed[rng() % allowed.size()];
    EXPECT_TRUE(m.AcceptToken(pick));
    EXPECT_TRUE(probe.AcceptToken(pick));
    if (!v.is_eos(pick)) text += v.bytes(pick);
  }
  return text;
}

TEST(MatcherTest, MaskEqualsBruteForceOverSmallVocabulary) {
  std::vector<std::string> extra = {"{\"",  "\":",  "\"}", "\", \"", "na", "name", "me\":", "12", "3,",  "true", "tr",
                                    "ue}", ", ",   "[\"", "a\\\"", "b\"]", "\xC3\xA9", "\xA9\"", "\":[", "]}", "\"n",
                                    "}",   "0.5", "e+", "[[", "]]", "1]", ",[", "null", "\"ok\": ", "\\u00", "e9"};
  auto vocab = ByteVocabulary(extra);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab->size(); ++id) ids.push_back(id);
  for (const char* schema : kSchemas) {
    auto g = Schema(schema, vocab);
    ASSERT_NE(g, nullptr);
    for (uint64_t seed = 1; seed <= 6; ++seed) CheckWalk(g, ids, 40, seed);
  }
}

TEST(MatcherTest, MaskEqualsBruteForceOverQwen3Vocabulary) {
  auto tok = tokenizer::Tokenizer::LoadFromDir(::tandem::testing::TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const int32_t eos = *(*tok)->TokenId("<|im_end|>");
  auto vocab = TokenVocabulary::FromTokenizer(**tok, 151936, {eos});
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab->size(); ++id) ids.push_back(id);
  auto g = Schema(kSchemas[0], vocab);
  ASSERT_NE(g, nullptr);
  const std::string text = CheckWalk(g, ids, 10, 7) + " / " + CheckWalk(g, ids, 10, 11);
  std::fprintf(stderr, "walked: %s\n", text.c_str());
  EXPECT_FALSE(text.empty());
  // Special tokens are never allowed, eos only at the end.
  GrammarMatcher m(g);
  std::vector<uint64_t> mask;
  m.FillMask(&mask);
  EXPECT_FALSE(Bit(mask, eos));
  EXPECT_FALSE(Bit(mask, *(*tok)->TokenId("<|im_start|>")));
  EXPECT_FALSE(Bit(mask, 151900));  // beyond the tokenizer: no bytes
  EXPECT_TRUE(Bit(mask, *(*tok)->TokenId("{\"")));
}

// A string of up to 1500 characters has a grammar position per remaining length: past
// CompiledGrammar::kMaxStoredMasks cached entries, masks are computed unstored and still exact.
TEST(MatcherTest, MasksStayExactPastTheCacheBound) {
  auto vocab = ByteVocabulary({"aaaa", "a\"", "\\n"});
  auto g = Schema(R"({"type":"string","maxLength":1500})", vocab);
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes("\""));
  std::vector<uint64_t> mask;
  for (int i = 0; i < 1500; ++i) {
    if (i % 250 == 0 || i >= 1497) {
      m.FillMask(&mask);
      for (int32_t id = 0; id < vocab->size(); ++id) {
        GrammarMatcher copy = m;
        ASSERT_EQ(Bit(mask, id), copy.AcceptToken(id)) << "after " << i << " characters, token " << id;
      }
    } else {
      m.FillMask(&mask);  // reaches a new position, as a decode step would
    }
    ASSERT_TRUE(m.AcceptToken('a'));
  }
  EXPECT_FALSE(m.AcceptToken('a'));  // 1500 characters: only the closing quote is left
  EXPECT_TRUE(m.AcceptToken('"'));
  EXPECT_TRUE(m.IsTerminated());
}

TEST(MatcherTest, EosOnlyWhenCompleteAndTerminationWithoutIt) {
  auto vocab = ByteVocabulary();
  const int32_t eos = static_cast<int32_t>(vocab->size() - 1);
  GrammarBuilder b;
  const RuleId root = b.AddRule("root");
  ASSERT_TRUE(b.Define(root, b.Seq({b.Literal("1"), b.Star(b.Literal("0"))})).ok());
  auto g = CompileOrDie(b, root, vocab);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.AcceptToken(eos));
  EXPECT_TRUE(m.AcceptToken('1'));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.IsTerminated());  // more zeros may follow
  EXPECT_TRUE(m.AcceptToken(eos));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.AcceptToken('0'));

  auto obj = Schema(R"({"type":"object","properties":{"a":{"const":1}},"required":["a"]})", vocab);
  GrammarMatcher o(obj);
  EXPECT_TRUE(o.AcceptBytes(R"({"a":1})"));
  EXPECT_TRUE(o.IsTerminated());  // nothing may follow the closing brace
  std::vector<uint64_t> mask;
  o.FillMask(&mask);
  EXPECT_TRUE(Bit(mask, eos));
  EXPECT_FALSE(Bit(mask, ' '));
}

// A walk that always takes the highest-ranked random token that fits the budget, else the
// completion token, ends complete within the budget.
TEST(MatcherTest, CompletesWithinTheTokenBudget) {
  std::vector<std::string> extra = {"{\"", "\":", "aaaa", "[[[[", "{\"a\":{\"b\":[", "12345"};
  auto vocab = ByteVocabulary(extra);
  const int32_t eos = static_cast<int32_t>(vocab->size() - 1);
  for (const char* schema : kSchemas) {
    auto g = Schema(schema, vocab);
    for (int budget : {8, 20, 40}) {
      GrammarMatcher fresh(g);
      if (fresh.MinBytesToEnd() > budget) continue;
      for (uint64_t seed = 1; seed <= 5; ++seed) {
        GrammarMatcher m(g);
        std::mt19937_64 rng(seed);
        std::vector<uint64_t> mask;
        std::string text;
        int used = 0;
        while (!m.IsTerminated() && used < budget) {
          m.FillMask(&mask);
          std::vector<int32_t> allowed;
          for (int32_t id = 0; id < vocab->size(); ++id) {
            if (Bit(mask, id) && id != eos) allowed.push_back(id);
          }
          int32_t pick = allowed.empty() ? -1 : allowed[rng() % allowed.size()];
          if (pick < 0 || !m.FitsBudget(pick, budget - used - 1)) pick = m.CompletionToken();
          ASSERT_GE(pick, 0);
          ASSERT_TRUE(m.AcceptToken(pick));
          if (pick != eos) text += vocab->bytes(pick);
          ++used;
        }
        EXPECT_TRUE(m.CanEnd()) << schema << " budget " << budget << ": " << text;
        EXPECT_TRUE(Matches(g, text)) << text;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::grammar
