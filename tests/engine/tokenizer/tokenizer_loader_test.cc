// Loading tokenizer.json and tokenizer_config.json: every malformed or unsupported document is
// refused with the key it is about (model.vocab, model.merges[0], a pre_tokenizer type, ...).
// (engine/tokenizer/tokenizer_loader.cc, through Tokenizer::LoadFromJson and LoadFromDir.)
#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tiny_tokenizer.h"

namespace tandem::tokenizer {
namespace {

using nlohmann::json;
using testing::LoadError;
using testing::TinyTokenizer;

TEST(LoadErrorTest, MalformedFilesAreRejectedWithTheKey) {
  {
    json j = TinyTokenizer({});
    j["model"].erase("vocab");
    EXPECT_NE(LoadError(j).find("model.vocab"), std::string::npos);
  }
  {
    json j = TinyTokenizer({});
    j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}};
    const std::string e = LoadError(j);
    EXPECT_NE(e.find("unsupported type \"Whitespace\""), std::string::npos) << e;
  }
  {
    json j = TinyTokenizer({});
    j["model"]["merges"] = json::array({"a b c"});
    EXPECT_NE(LoadError(j).find("model.merges[0]"), std::string::npos);
    j["model"]["merges"] = json::array({json::array({"a", "zz"})});
    const std::string e = LoadError(j);
    EXPECT_NE(e.find("not in model.vocab"), std::string::npos) << e;
    j["model"]["merges"] = json::array({42});
    EXPECT_NE(LoadError(j).find("model.merges[0]"), std::string::npos);
  }
  {
    json j = TinyTokenizer({});
    j["normalizer"] = {{"type", "Lowercase"}};
    EXPECT_NE(LoadError(j).find("\"Lowercase\""), std::string::npos);
    j = TinyTokenizer({});
    j["model"]["type"] = "WordPiece";
    EXPECT_NE(LoadError(j).find("\"WordPiece\""), std::string::npos);
    j = TinyTokenizer({});
    j["decoder"] = nullptr;
    EXPECT_NE(LoadError(j).find("decoder"), std::string::npos);
    j = TinyTokenizer({});
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
    EXPECT_NE(LoadError(j).find("regex does not compile"), std::string::npos);
    j = TinyTokenizer({});
    j["model"]["vocab"]["中"] = 999;
    EXPECT_NE(LoadError(j).find("byte-level alphabet"), std::string::npos);
    j = TinyTokenizer({});
    j["added_tokens"] = json::array({{{"id", 3}, {"content", "x"}}, {{"id", 3}, {"content", "y"}}});
    EXPECT_NE(LoadError(j).find("used twice"), std::string::npos);
    // An id past int32_t used to wrap into another id (4294967299 -> 3); negative ones are refused.
    for (const int64_t id : {int64_t{4294967299}, int64_t{-1}}) {
      j = TinyTokenizer({});
      j["added_tokens"] = json::array({{{"id", id}, {"content", "x"}}});
      const std::string e = LoadError(j);
      EXPECT_NE(e.find("added_tokens[0]"), std::string::npos) << e;
      EXPECT_NE(e.find("id must be an integer in [0, 2147483647]"), std::string::npos) << e;
    }
  }
  auto t = Tokenizer::LoadFromJson("{\"model\": ", "");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("tokenizer.json"), std::string::npos);
  auto missing = Tokenizer::LoadFromDir("/nonexistent-dir");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto bad_config = Tokenizer::LoadFromJson(TinyTokenizer({}).dump(), R"({"eos_token": "<nope>"})");
  ASSERT_FALSE(bad_config.ok());
  EXPECT_NE(std::string(bad_config.status().message()).find("<nope>"), std::string::npos);
}

}  // namespace
}  // namespace tandem::tokenizer
