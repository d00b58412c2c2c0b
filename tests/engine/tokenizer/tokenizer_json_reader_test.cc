// The streaming tokenizer.json reader (engine/tokenizer/tokenizer_json_reader.cc): model.vocab and
// model.merges come out as flat vectors in file order (both merge spellings), everything else as
// a tree without them; malformed input fails naming the key or the byte where it went wrong.
#include "engine/tokenizer/tokenizer_json_reader.h"

#include <gtest/gtest.h>

namespace tandem::tokenizer {
namespace {

using Vocab = std::vector<std::pair<std::string, int64_t>>;
using Merges = std::vector<std::pair<std::string, std::string>>;

TEST(TokenizerJsonReader, SplitsVocabAndMergesFromTheRest) {
  const std::string text = R"({
    "version": "1.0",
    "added_tokens": [{"id": 3, "content": "<s>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b", ["ab", "b"]],
              "ignore_merges": false},
    "post_processor": null
  })";
  auto parts = ReadTokenizerJson(text);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_TRUE(parts->has_vocab);
  EXPECT_TRUE(parts->has_merges);
  EXPECT_EQ(parts->vocab, (Vocab{{"a", 0}, {"b", 1}, {"ab", 2}}));
  EXPECT_EQ(parts->merges, (Merges{{"a", "b"}, {"ab", "b"}}));
  const nlohmann::json& rest = parts->rest;
  EXPECT_EQ(rest["version"], "1.0");
  EXPECT_EQ(rest["added_tokens"][0]["content"], "<s>");
  EXPECT_EQ(rest["model"]["type"], "BPE");
  EXPECT_EQ(rest["model"]["ignore_merges"], false);
  EXPECT_FALSE(rest["model"].contains("vocab"));
  EXPECT_FALSE(rest["model"].contains("merges"));
  EXPECT_TRUE(rest["post_processor"].is_null());
}

TEST(TokenizerJsonReader, OnlyModelsVocabIsStreamed) {
  // A "vocab" or "merges" elsewhere stays in the tree; a file without them says so.
  auto parts = ReadTokenizerJson(R"({"extra": {"vocab": {"x": 1}, "merges": ["x y"]}, "model": {"type": "BPE"}})");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_FALSE(parts->has_vocab);
  EXPECT_FALSE(parts->has_merges);
  EXPECT_TRUE(parts->vocab.empty());
  EXPECT_EQ(parts->rest["extra"]["vocab"]["x"], 1);
  EXPECT_EQ(parts->rest["extra"]["merges"][0], "x y");
}

TEST(TokenizerJsonReader, MalformedInputNamesWhereAndWhat) {
  struct Case {
    std::string text, want;
  };
  const std::vector<Case> cases = {
      {R"({"model": {"vocab": {"a": "zero"}}})", "tokenizer.json: model.vocab[\"a\"]: expected an integer id"},
      {R"({"model": {"vocab": {"a": -1}}})", "tokenizer.json: model.vocab[\"a\"]: id out of range"},
      {R"({"model": {"vocab": {"a": 4294967296}}})", "tokenizer.json: model.vocab[\"a\"]: id out of range"},
      {R"({"model": {"vocab": {"a": [0]}}})", "tokenizer.json: model.vocab[\"a\"]: expected an integer id"},
      {R"({"model": {"merges": ["a b", "abc"]}})",
       "tokenizer.json: model.merges[1]: \"abc\" is not two tokens separated by one space"},
      {R"({"model": {"merges": ["a b c"]}})",
       "tokenizer.json: model.merges[0]: \"a b c\" is not two tokens separated by one space"},
      {R"({"model": {"merges": [["a"]]}})", "tokenizer.json: model.merges[0]: must be \"a b\" or [\"a\", \"b\"]"},
      {R"({"model": {"merges": [["a", "b", "c"]]}})",
       "tokenizer.json: model.merges[0]: must be \"a b\" or [\"a\", \"b\"]"},
      {R"({"model": {"merges": [7]}})", "tokenizer.json: model.merges[0]: expected \"a b\" or [\"a\", \"b\"]"},
      {R"({"model": {"merges": [{"a": "b"}]}})",
       "tokenizer.json: model.merges[0]: expected \"a b\" or [\"a\", \"b\"]"},
  };
  for (const Case& c : cases) {
    auto parts = ReadTokenizerJson(c.text);
    ASSERT_FALSE(parts.ok()) << c.text;
    EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(parts.status().message(), c.want) << c.text;
  }
}

TEST(TokenizerJsonReader, SyntaxErrorsGiveTheByte) {
  for (const std::string text : {R"({"model": {"vocab": {"a": 0,}}})", R"({"model": )", ""}) {
    auto parts = ReadTokenizerJson(text);
    ASSERT_FALSE(parts.ok()) << text;
    const std::string msg(parts.status().message());
    EXPECT_EQ(msg.rfind("tokenizer.json: syntax error near byte ", 0), 0u) << msg;
  }
}

}  // namespace
}  // namespace tandem::tokenizer
