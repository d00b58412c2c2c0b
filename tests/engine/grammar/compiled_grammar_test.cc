// What Compile prepares: the mask cache entries of every position outside string content are
// made with the grammar (kept as ids when they accept few tokens), so that a request's decode
// steps find them.
#include "engine/grammar/compiled_grammar.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "nlohmann/json.hpp"
#include "tests/engine/grammar/grammar_test_util.h"

namespace tandem::grammar {
namespace {

TEST(CompiledGrammarTest, CompileMakesTheEntriesOutsideStrings) {
  auto vocab = ByteVocabulary({"{\"", "[1", "tr", "\":", "ab", "\", \""});
  for (const char* schema : {R"({"type":"object"})", R"({})", R"({"enum":[1,"a",true]})",
                             R"({"type":"object","properties":{"k":{"type":"string","maxLength":3}}})"}) {
    GrammarBuilder b;
    absl::StatusOr<RuleId> root = AddJsonSchema(nlohmann::ordered_json::parse(schema), b, "root");
    ASSERT_TRUE(root.ok()) << root.status();
    auto g = CompileOrDie(b, *root, vocab);
    ASSERT_NE(g, nullptr);
    size_t outside = 0;  // byte-set positions outside string content
    for (int32_t pos = 0; pos < static_cast<int32_t>(g->grammar().elements.size()); ++pos) {
      if (g->grammar().elements[pos].kind == Element::Kind::kBytes && !g->IsStringContent(pos)) ++outside;
    }
    ASSERT_LE(outside, CompiledGrammar::kCompiledMasks);
    EXPECT_EQ(g->StoredMasks(), outside) << schema;
    // A walk outside strings computes nothing new; a stored entry with few tokens keeps ids,
    // and the matcher's masks stay what AcceptToken takes.
    GrammarMatcher m(g);
    std::vector<uint64_t> mask;
    m.FillMask(&mask);
    EXPECT_EQ(g->StoredMasks(), outside) << schema;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      GrammarMatcher copy = m;
      EXPECT_EQ((mask[id >> 6] >> (id & 63)) & 1, copy.AcceptToken(id) ? 1u : 0u) << schema << " token " << id;
    }
    std::vector<StackNode> pool;
    const MatchState start = g->Start(&pool);
    ASSERT_FALSE(start.tops.empty());
    EXPECT_TRUE(g->MaskAt(pool[start.tops[0]].pos).sparse()) << schema;
  }
}

}  // namespace
}  // namespace tandem::grammar
