// JSON Schema as a grammar: conformance cases (instances the schema accepts match, ones it
// rejects do not, the output format's whitespace and member order), and every unsupported
// keyword refused with its place named.
#include "engine/grammar/json_schema.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "tests/engine/grammar/grammar_test_util.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const CompiledGrammar> SchemaGrammar(const std::string& schema) {
  GrammarBuilder b;
  absl::StatusOr<RuleId> root = AddJsonSchema(Json::parse(schema), b, "root");
  EXPECT_TRUE(root.ok()) << root.status();
  if (!root.ok()) return nullptr;
  return CompileOrDie(b, *root, ByteVocabulary());
}

absl::Status SchemaError(const std::string& schema) {
  GrammarBuilder b;
  return AddJsonSchema(Json::parse(schema), b, "root").status();
}

struct Case {
  const char* text;
  bool valid;
};

void ExpectCases(const std::string& schema, const std::vector<Case>& cases) {
  auto g = SchemaGrammar(schema);
  ASSERT_NE(g, nullptr);
  for (const Case& c : cases) EXPECT_EQ(Matches(g, c.text), c.valid) << schema << " on " << c.text;
}

TEST(JsonSchemaTest, ObjectMembersInSchemaOrderRequiredAndOptional) {
  ExpectCases(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                  "tags":{"type":"array","items":{"type":"string"}}},"required":["name","age"],
                  "additionalProperties":false})",
              {{R"({"name":"Ann","age":31})", true},
               {R"({"name": "Ann", "age": 31, "tags": ["a", "b"]})", true},
               {R"({"name":"Ann","age":31,"tags":[]})", true},
               {R"({"age":31,"name":"Ann"})", false},           // order of the schema
               {R"({"name":"Ann"})", false},                    // age is required
               {R"({"name":"Ann","age":31.5})", false},         // integer
               {R"({"name":"Ann","age":31,"x":1})", false},     // no additional properties
               {R"({ "name":"Ann","age":31})", false},          // whitespace only after , and :
               {R"({"name":"Ann",  "age":31})", false}});
}

TEST(JsonSchemaTest, AllOptionalMembersTakeCommasOnlyBetween) {
  ExpectCases(R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"const":7}}})",
              {{"{}", true},
               {R"({"b":null})", true},
               {R"({"a":true,"c":7})", true},
               {R"({"a":false, "b":null, "c":7})", true},
               {R"({,"b":null})", false},
               {R"({"a":true,})", false},
               {R"({"c":8})", false}});
}

TEST(JsonSchemaTest, StringsEscapesAndLengths) {
  ExpectCases(R"({"type":"string","minLength":2,"maxLength":3})",
              {{R"("ab")", true}, {R"("a\"c")", true}, {R"("\u00e9t")", true}, {"\"\xC3\xA9t\"", true},
               {R"("a")", false}, {R"("abcd")", false}, {"\"a\nb\"", false}, {R"("\x")", false}});
  ExpectCases(R"({"type":"string"})", {{R"("")", true}, {R"("tab\there")", true}, {"\"\xFF\"", false}});
}

TEST(JsonSchemaTest, NumbersIntegersBooleansNull) {
  ExpectCases(R"({"type":"number"})", {{"0", true},     {"-12.5e+3", true}, {"1E9", true},  {"01", false},
                                       {"1.", false},   {".5", false},      {"+1", false},  {"-", false}});
  ExpectCases(R"({"type":["integer","null"]})", {{"-7", true}, {"null", true}, {"7.0", false}, {"true", false}});
  ExpectCases(R"({"type":"boolean"})", {{"true", true}, {"false", true}, {"True", false}});
  ExpectCases(R"({"type":"number","minimum":0})", {{"0", true}, {"2.5e-3", true}, {"-1", false}, {"-0.5", false}});
  ExpectCases(R"({"type":"integer","minimum":1})", {{"1", true}, {"907", true}, {"0", false}, {"-3", false}});
  ExpectCases(R"({"type":"integer","minimum":0})", {{"0", true}, {"12", true}, {"-1", false}});
}

TEST(JsonSchemaTest, EnumConstAnyOfOneOf) {
  ExpectCases(R"({"enum":["red","green",3,null,{"k":[1]}]})",
              {{R"("red")", true}, {"3", true}, {"null", true}, {R"({"k":[1]})", true}, {R"("blue")", false}});
  ExpectCases(R"({"anyOf":[{"type":"string","maxLength":1},{"type":"integer"}]})",
              {{R"("a")", true}, {"42", true}, {R"("ab")", false}});
  ExpectCases(R"({"oneOf":[{"type":"string"},{"type":"array","items":{"type":"number"}}]})",
              {{R"("a")", true}, {"[1, 2.5]", true}, {"{}", false}});
}

TEST(JsonSchemaTest, ArraysCountItems) {
  ExpectCases(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
              {{"[1]", true}, {"[1,2,3]", true}, {"[1, 2]", true}, {"[]", false}, {"[1,2,3,4]", false}, {"[1,]", false}});
  ExpectCases(R"({"type":"array","maxItems":0})", {{"[]", true}, {"[1]", false}});
}

TEST(JsonSchemaTest, RefsAndRecursion) {
  ExpectCases(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                   "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},
                  "$ref":"#/$defs/node"})",
              {{R"({"v":1,"next":null})", true},
               {R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})", true},
               {R"({"v":1,"next":{"v":2}})", false}});
}

TEST(JsonSchemaTest, AnyJsonAndMaps) {
  ExpectCases(R"({})", {{R"({"a":[1,{"b":null}],"c":"d"})", true}, {"[]", true}, {"-0.5", true}, {"nul", false}});
  ExpectCases(R"({"type":"object","additionalProperties":{"type":"integer"}})",
              {{R"({"x":1, "y":2})", true}, {"{}", true}, {R"({"x":"1"})", false}});
  GrammarBuilder b;
  const RuleId obj = AddAnyJsonObject(b, "object");
  auto g = CompileOrDie(b, obj, ByteVocabulary());
  EXPECT_TRUE(Matches(g, R"({"a":{"b":[true]}})"));
  EXPECT_FALSE(Matches(g, "[1]"));
  EXPECT_FALSE(Matches(g, R"("s")"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreRefusedWithTheirPlace) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"string","pattern":"^a+$"})", "/: unsupported keyword \"pattern\""},
      {R"({"type":"object","properties":{"d":{"type":"string","format":"date"}}})",
       "/properties/d: unsupported keyword \"format\""},
      {R"({"type":"number","minimum":5})", "/minimum: only minimum 0 is supported"},
      {R"({"type":"number","maximum":5})", "/: unsupported keyword \"maximum\""},
      {R"({"type":"array","items":{"type":"integer","multipleOf":2}})", "/items: unsupported keyword \"multipleOf\""},
      {R"({"type":"array","uniqueItems":true})", "unsupported keyword \"uniqueItems\""},
      {R"({"not":{}})", "unsupported keyword \"not\""},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "/required: required property \"b\""},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"$ref":"https://example.com/s.json"})", "only local references"},
      {R"({"type":"strin"})", "/type: unknown type"},
      {R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]})", "can match the same value"},
      {R"({"allOf":[{"type":"string"},{"maxLength":2}]})", "allOf with more than one"},
      {R"({"type":"string","maxLength":99999})", "/maxLength: must be an integer"},
  };
  // Too many members for one object.
  Json wide = {{"type", "object"}, {"properties", Json::object()}};
  for (int i = 0; i < 300; ++i) wide["properties"]["p" + std::to_string(i)] = {{"type", "integer"}};
  EXPECT_NE(SchemaError(wide.dump()).message().find("/properties: more than 256 properties"), std::string::npos);
  // A schema nested deeper than the compiler recurses.
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += R"({"type":"array","items":)";
  deep += "{}" + std::string(100, '}');
  const absl::Status st = SchemaError(deep);
  EXPECT_NE(st.message().find("nested deeper than 64"), std::string::npos) << st;
  for (const auto& [schema, want] : cases) {
    const absl::Status st = SchemaError(schema);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << schema;
    EXPECT_NE(st.message().find(want), std::string::npos) << schema << " -> " << st.message();
  }
}

}  // namespace
}  // namespace tandem::grammar
