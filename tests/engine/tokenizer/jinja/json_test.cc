#include "engine/tokenizer/jinja/json.h"

#include <gtest/gtest.h>

namespace tandem::jinja {
namespace {

using Json = nlohmann::ordered_json;

TEST(JinjaJson, FromJsonLikeJavaScript) {
  auto v = FromJson(Json::parse(R"({"b": 1, "2": true, "a": [2.0, 2.5, null], "1": "x"})"));
  ASSERT_TRUE(v.ok());
  const auto& e = v->object().entries();
  ASSERT_EQ(e.size(), 4u);
  // Keys that are array indices come first, in numeric order, as Object.entries lists them.
  EXPECT_EQ(e[0].first, "1");
  EXPECT_EQ(e[1].first, "2");
  EXPECT_EQ(e[2].first, "b");
  EXPECT_EQ(e[3].first, "a");
  EXPECT_TRUE(e[3].second.items()[0].is_int());  // 2.0 is the JavaScript number 2
  EXPECT_TRUE(e[3].second.items()[1].is_float());
  EXPECT_TRUE(e[3].second.items()[2].is_none());
}

TEST(JinjaJson, ToJsonFormats) {
  auto v = FromJson(Json::parse(R"({"k": [1, {"é": "\u00e9\n"}], "e": {}})"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*ToJson(*v, {}), "{\"k\": [1, {\"é\": \"é\\n\"}], \"e\": {}}");
  JsonOptions pretty;
  pretty.indent = 2;
  EXPECT_EQ(*ToJson(*v, pretty), "{\n  \"k\": [\n    1,\n    {\n      \"é\": \"é\\n\"\n    }\n  ],\n  \"e\": {}\n}");
  JsonOptions ascii;
  ascii.ensure_ascii = true;
  ascii.separators = std::make_pair(std::string(","), std::string(":"));
  EXPECT_EQ(*ToJson(*v, ascii), "{\"k\":[1,{\"\\u00e9\":\"\\u00e9\\n\"}],\"e\":{}}");
  EXPECT_EQ(*ToJson(Value::Float(INFINITY), {}), "null");
}

TEST(JinjaJson, RefusesFunctionsAndCycles) {
  EXPECT_FALSE(ToJson(Value::MakeFunction([](const CallArgs&) -> absl::StatusOr<Value> { return Value(); }), {}).ok());
  auto ns = std::make_shared<Object>();
  ns->Set("me", Value::Namespace(ns));
  EXPECT_FALSE(ToJson(Value::Namespace(ns), {}).ok());
  EXPECT_FALSE(ToJsonLenient(Value::Namespace(ns), {}).empty());
  ns->Clear();  // break the cycle
}

TEST(JinjaJson, DeepInputIsRefused) {
  std::string deep(kMaxJsonDepth + 10, '[');
  deep += std::string(kMaxJsonDepth + 10, ']');
  EXPECT_FALSE(FromJson(Json::parse(deep)).ok());
}

}  // namespace
}  // namespace tandem::jinja
