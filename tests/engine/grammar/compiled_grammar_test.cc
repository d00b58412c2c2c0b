// What Compile prepares: the mask cache entries of the start state's positions are made with
// the grammar, so that a request's first decode step finds them.
#include "engine/grammar/compiled_grammar.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "engine/grammar/json_schema.h"
#include "nlohmann/json.hpp"
#include "tests/engine/grammar/grammar_test_util.h"

namespace tandem::grammar {
namespace {

TEST(CompiledGrammarTest, CompileMakesTheStartStateEntries) {
  auto vocab = ByteVocabulary({"{\"", "[1", "tr"});
  for (const char* schema : {R"({"type":"object"})", R"({})", R"({"enum":[1,"a",true]})"}) {
    GrammarBuilder b;
    absl::StatusOr<RuleId> root = AddJsonSchema(nlohmann::ordered_json::parse(schema), b, "root");
    ASSERT_TRUE(root.ok()) << root.status();
    auto g = CompileOrDie(b, *root, vocab);
    ASSERT_NE(g, nullptr);
    std::vector<StackNode> pool;
    const MatchState start = g->Start(&pool);
    std::vector<int32_t> positions;
    for (int32_t top : start.tops) positions.push_back(pool[top].pos);
    std::sort(positions.begin(), positions.end());
    positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
    EXPECT_EQ(g->StoredMasks(), positions.size()) << schema;
    // The first mask computes nothing new.
    GrammarMatcher m(g);
    std::vector<uint64_t> mask;
    m.FillMask(&mask);
    EXPECT_EQ(g->StoredMasks(), positions.size()) << schema;
    size_t allowed = 0;
    for (uint64_t w : mask) allowed += static_cast<size_t>(__builtin_popcountll(w));
    EXPECT_GT(allowed, 0u) << schema;
  }
}

}  // namespace
}  // namespace tandem::grammar
