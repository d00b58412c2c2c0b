// The ids that end a turn: the generation config's eos_token_id as transformers reads it
// (generation_config.json whole, else config.json or its text_config; int, list or null), and
// through Tokenizer::LoadFromDir the tokenizer_config.json eos_token first, without repeats.
#include "engine/tokenizer/eos_token_ids.h"

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "tests/common/test_util.h"
#include "tests/engine/tokenizer/tiny_tokenizer.h"

namespace tandem::tokenizer {
namespace {

using ::tandem::testing::TempDir;
using Ids = std::vector<int32_t>;

void Write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(GenerationEosTokenIdsTest, GenerationConfigWinsOverConfig) {
  TempDir dir;
  EXPECT_EQ(*ReadGenerationEosTokenIds(dir.path()), Ids{});
  Write(dir.path() + "/config.json", R"({"eos_token_id": 7})");
  EXPECT_EQ(*ReadGenerationEosTokenIds(dir.path()), (Ids{7}));
  // A generation_config.json is read whole: its list, or nothing at all when it has no eos.
  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": [9, 3], "do_sample": true})");
  EXPECT_EQ(*ReadGenerationEosTokenIds(dir.path()), (Ids{9, 3}));
  Write(dir.path() + "/generation_config.json", R"({"do_sample": true})");
  EXPECT_EQ(*ReadGenerationEosTokenIds(dir.path()), Ids{});
  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": null})");
  EXPECT_EQ(*ReadGenerationEosTokenIds(dir.path()), Ids{});
}

// Multimodal checkpoints (Qwen3.5) keep the text model's settings under text_config.
TEST(GenerationEosTokenIdsTest, ConfigTextConfig) {
  TempDir dir;
  Write(dir.path() + "/config.json", R"({"model_type": "qwen3_5_moe", "text_config": {"eos_token_id": [5, 6]}})");
  EXPECT_EQ(*ReadGenerationEosTokenIds(dir.path()), (Ids{5, 6}));
  Write(dir.path() + "/config.json", R"({"eos_token_id": 4, "text_config": {"eos_token_id": [5, 6]}})");
  EXPECT_EQ(*ReadGenerationEosTokenIds(dir.path()), (Ids{4}));
}

TEST(GenerationEosTokenIdsTest, MalformedIdsNameTheFileAndKey) {
  TempDir dir;
  const std::string gen = dir.path() + "/generation_config.json";
  for (const char* text : {R"({"eos_token_id": [1, "x"]})", R"({"eos_token_id": -1})", R"({"eos_token_id": 4294967296})",
                           R"({"eos_token_id": [[1]]})", R"({"eos_token_id": 1.5})"}) {
    Write(gen, text);
    auto ids = ReadGenerationEosTokenIds(dir.path());
    ASSERT_FALSE(ids.ok()) << text;
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(ids.status().message().find(gen + ": eos_token_id"), std::string::npos) << ids.status();
  }
  Write(gen, "[1, 2");
  EXPECT_NE(ReadGenerationEosTokenIds(dir.path()).status().message().find("not a JSON object"), std::string::npos);
  std::remove(gen.c_str());
  Write(dir.path() + "/config.json", R"({"text_config": {"eos_token_id": "</s>"}})");
  EXPECT_NE(ReadGenerationEosTokenIds(dir.path()).status().message().find("config.json: text_config.eos_token_id"),
            std::string::npos);
}

TEST(TokenizerEosTokenIdsTest, TokenizerEosFirstThenGenerationConfigWithoutRepeats) {
  TempDir dir;
  nlohmann::json tok = testing::TinyTokenizer({});
  tok["added_tokens"] = nlohmann::json::array({{{"id", 300}, {"content", "<end>"}, {"special", true}},
                                               {{"id", 301}, {"content", "<eot>"}, {"special", true}}});
  Write(dir.path() + "/tokenizer.json", tok.dump());
  auto t = Tokenizer::LoadFromDir(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->eos_token_ids(), Ids{});  // nothing names an eos

  Write(dir.path() + "/tokenizer_config.json", R"({"eos_token": "<eot>"})");
  Write(dir.path() + "/config.json", R"({"eos_token_id": 300})");
  t = Tokenizer::LoadFromDir(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->eos_token_ids(), (Ids{301, 300}));

  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": [301, 300, 12]})");
  t = Tokenizer::LoadFromDir(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->eos_token_ids(), (Ids{301, 300, 12}));

  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": "<eot>"})");
  EXPECT_EQ(Tokenizer::LoadFromDir(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
}

// The Qwen3 fixture (tokenizer files only) ends turns on <|im_end|>.
TEST(TokenizerEosTokenIdsTest, Qwen3Fixture) {
  auto t = Tokenizer::LoadFromDir(::tandem::testing::TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->eos_token_ids(), (Ids{*(*t)->TokenId("<|im_end|>")}));
}

}  // namespace
}  // namespace tandem::tokenizer
