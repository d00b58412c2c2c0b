#include "bench/prompt_set.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "tests/common/test_util.h"

namespace tandem::bench {
namespace {

TEST(PromptSet, DefaultHasThreeCategoriesOfDifferentLengths) {
  const PromptSet& set = DefaultPromptSet();
  EXPECT_EQ(PromptCategories(set), (std::vector<std::string>{"code", "english", "chinese"}));
  for (const std::string& category : PromptCategories(set)) {
    std::set<size_t> lengths;
    for (const BenchPrompt& p : set) {
      if (p.category == category) lengths.insert(p.prompt.size());
    }
    EXPECT_GE(lengths.size(), 5u) << category;
    EXPECT_LE(lengths.size(), 10u) << category;
    // From a question to a page: the longest is many times the shortest.
    EXPECT_GT(*lengths.rbegin(), 8 * *lengths.begin()) << category;
  }
}

TEST(PromptSet, ParsesJsonlInOrderSkippingBlankLines) {
  absl::StatusOr<PromptSet> set = ParsePromptSetJsonl(
      "{\"category\": \"code\", \"prompt\": \"fizzbuzz\"}\n\n"
      "{\"prompt\": \"雨\", \"category\": \"zh\"}\r\n"
      "{\"category\": \"code\", \"prompt\": \"quicksort\"}\n",
      "p.jsonl");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->size(), 3u);
  EXPECT_EQ((*set)[1].category, "zh");
  EXPECT_EQ((*set)[1].prompt, "雨");
  EXPECT_EQ((*set)[2].prompt, "quicksort");
  EXPECT_EQ(PromptCategories(*set), (std::vector<std::string>{"code", "zh"}));
}

TEST(PromptSet, NamesTheBadLine) {
  const std::string good = "{\"category\": \"a\", \"prompt\": \"b\"}\n";
  struct Case {
    std::string line, message;
  } cases[] = {
      {"{\"category\": \"a\", \"prompt\": \"b\"", "p.jsonl:3: not a JSON object"},
      {"[1, 2]", "p.jsonl:3: not a JSON object"},
      {"{\"category\": \"a\"}", "p.jsonl:3: prompt: missing"},
      {"{\"prompt\": \"a\"}", "p.jsonl:3: category: missing"},
      {"{\"category\": \"a\", \"prompt\": 7}", "p.jsonl:3: prompt: expected a non-empty string"},
      {"{\"category\": \"\", \"prompt\": \"b\"}", "p.jsonl:3: category: expected a non-empty string"},
      {"{\"category\": \"a\", \"prompt\": \"b\", \"max_tokens\": 5}", "p.jsonl:3: unknown key \"max_tokens\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PromptSet> set = ParsePromptSetJsonl(good + "\n" + c.line + "\n" + good, "p.jsonl");
    ASSERT_FALSE(set.ok()) << c.line;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(set.status().message()).find(c.message), std::string::npos) << set.status();
  }
  EXPECT_FALSE(ParsePromptSetJsonl("\n  \n", "empty.jsonl").ok());
}

TEST(PromptSet, LoadsAFile) {
  testing::TempDir dir;
  std::ofstream(dir / "p.jsonl") << "{\"category\": \"c\", \"prompt\": \"p\"}\n";
  absl::StatusOr<PromptSet> set = LoadPromptSetJsonl(dir / "p.jsonl");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 1u);
  EXPECT_EQ(LoadPromptSetJsonl(dir / "absent.jsonl").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::bench
