// The LLMEngine with a grammar (SamplingParams::grammar) on the real cpu backend: the tiny
// random-weight model (qwen3moe-tiny, 4096 ids of the real Qwen3 tokenizer) writes text that
// parses as JSON and has the schema's shape, greedy and sampled, ending "stop" when the grammar
// completes, even when max_tokens leaves little room; without the grammar the same model does not
// write JSON.
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "engine/batching/llm_engine.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/engine/batching/engine_on_ranks.h"
#include "tests/engine/batching/llm_engine_test_util.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine {
namespace {

using Json = nlohmann::ordered_json;

struct SchemaCase {
  const char* schema;
  std::function<bool(const Json&)> valid;  // the schema's constraints, checked by hand
};

const SchemaCase kCases[] = {
    {R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},"temp":{"type":"number"},
        "unit":{"enum":["C","F"]}},"required":["city","temp","unit"],"additionalProperties":false})",
     [](const Json& j) {
       return j.is_object() && j.size() == 3 && j["city"].is_string() && j["city"].get<std::string>().size() <= 48 &&
              j["temp"].is_number() && (j["unit"] == "C" || j["unit"] == "F");
     }},
    {R"({"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"}},
        "required":["id"]},"minItems":1,"maxItems":3})",
     [](const Json& j) {
       if (!j.is_array() || j.empty() || j.size() > 3) return false;
       for (const auto& x : j) {
         if (!x.is_object() || !x.contains("id") || !x["id"].is_number_integer()) return false;
         if (x.contains("ok") && !x["ok"].is_boolean()) return false;
       }
       return true;
     }},
    {R"({"type":"object"})", [](const Json& j) { return j.is_object(); }},
};

std::shared_ptr<const grammar::CompiledGrammar> Compile(const char* schema, const tokenizer::Tokenizer& tok,
                                                        int64_t vocab) {
  grammar::GrammarBuilder b;
  auto root = grammar::AddJsonSchema(Json::parse(schema), b, "root");
  EXPECT_TRUE(root.ok()) << root.status();
  auto g = b.Build(*root);
  EXPECT_TRUE(g.ok()) << g.status();
  auto c = grammar::CompiledGrammar::Compile(std::move(*g), grammar::TokenVocabulary::FromTokenizer(tok, vocab, {}));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(ConstrainedEngineTest, RandomWeightsWriteValidJson) {
  auto tok = tokenizer::Tokenizer::LoadFromDir(testing::TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EngineOptions options;
  options.kv_tokens = 8192;
  testing::WithEngineOn(testing::TinyModelDir(), 1, options, tok->get(), [&](LLMEngine& e) {
    const std::vector<int32_t> prompt = {785, 1196, 374, 2033, 25};  // ids the tiny model has
    int n = 0;
    for (const SchemaCase& c : kCases) {
      auto g = Compile(c.schema, **tok, 4096);
      for (int max_tokens : {40, 200}) {
        for (int seed = 0; seed < 3; ++seed) {
          GenerationRequest r;
          r.request_id = "g" + std::to_string(n++);
          r.prompt_ids = prompt;
          r.params.max_tokens = max_tokens;
          r.params.temperature = seed == 0 ? 0.0f : 1.0f;
          r.params.seed = seed;
          r.params.grammar = g;
          testing::Sink sink;
          const absl::Status st = e.Submit(r, sink.Callback());
          ASSERT_TRUE(st.ok()) << st;
          ASSERT_TRUE(sink.Wait());
          const testing::Received got = sink.Get();
          std::printf("max_tokens %d seed %d: %s (%s, %lld tokens)\n", max_tokens, seed, got.text.c_str(),
                      got.finish_reason.c_str(), static_cast<long long>(got.completion_tokens));
          EXPECT_EQ(got.finish_reason, "stop") << c.schema;
          EXPECT_LE(got.completion_tokens, max_tokens);
          const Json j = Json::parse(got.text, nullptr, /*allow_exceptions=*/false);
          ASSERT_FALSE(j.is_discarded()) << c.schema << " -> " << got.text;
          EXPECT_TRUE(c.valid(j)) << c.schema << " -> " << got.text;
        }
      }
    }
    // The same prompt without a grammar: the random model's text is no JSON object.
    GenerationRequest r;
    r.prompt_ids = prompt;
    r.params.max_tokens = 24;
    r.params.temperature = 0.0f;
    testing::Sink sink;
    ASSERT_TRUE(e.Submit(r, sink.Callback()).ok());
    ASSERT_TRUE(sink.Wait());
    EXPECT_TRUE(Json::parse(sink.Get().text, nullptr, false).is_discarded()) << sink.Get().text;
  });
}

}  // namespace
}  // namespace tandem::engine
