#include "openai/response_format.h"

#include <cctype>

#include "engine/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"
#include "openai/openai_protocol.h"

namespace tandem::openai {

namespace {

using Json = nlohmann::ordered_json;

ApiError FieldError(const std::string& param, const std::string& message) { return InvalidRequest(message, param); }

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

// Keys other than `allowed` are refused, naming the first one found.
std::optional<ApiError> RefuseOtherKeys(const Json& object, const std::string& param,
                                        std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) return FieldError(param + "." + key, "unknown field '" + param + "." + key + "'");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseResponseFormat(const Json& value, ResponseFormat* out) {
  if (!value.is_object()) {
    return FieldError("response_format", std::string("'response_format' must be an object, got ") + value.type_name());
  }
  auto type = value.find("type");
  if (type == value.end() || !type->is_string()) {
    return FieldError("response_format.type", "'response_format.type' must be one of 'text', 'json_object', 'json_schema'");
  }
  const std::string t = type->get<std::string>();
  *out = ResponseFormat{};
  if (t == "text" || t == "json_object") {
    if (auto e = RefuseOtherKeys(value, "response_format", {"type"})) return e;
    if (t == "text") return std::nullopt;
    out->type = ResponseFormat::Type::kJsonObject;
    grammar::GrammarBuilder b;
    absl::StatusOr<grammar::Grammar> g = b.Build(grammar::AddAnyJsonObject(b, "json_object"));
    if (!g.ok()) return FieldError("response_format", std::string(g.status().message()));
    out->grammar = std::make_shared<const grammar::Grammar>(std::move(*g));
    out->key = "json_object";
    return std::nullopt;
  }
  if (t != "json_schema") {
    return FieldError("response_format.type",
                      "'response_format.type' must be one of 'text', 'json_object', 'json_schema', got '" + t + "'");
  }
  if (auto e = RefuseOtherKeys(value, "response_format", {"type", "json_schema"})) return e;
  auto js = value.find("json_schema");
  if (js == value.end() || !js->is_object()) {
    return FieldError("response_format.json_schema", "'response_format.json_schema' must be an object");
  }
  if (auto e = RefuseOtherKeys(*js, "response_format.json_schema", {"name", "description", "schema", "strict"})) {
    return e;
  }
  auto name = js->find("name");
  if (name == js->end() || !name->is_string() || !ValidName(name->get<std::string>())) {
    return FieldError("response_format.json_schema.name",
                      "'response_format.json_schema.name' must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'");
  }
  if (auto d = js->find("description"); d != js->end() && !d->is_null() && !d->is_string()) {
    return FieldError("response_format.json_schema.description", "'response_format.json_schema.description' must be a string");
  }
  if (auto s = js->find("strict"); s != js->end() && !s->is_null() && !s->is_boolean()) {
    return FieldError("response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean");
  }
  // No schema: any JSON value (the empty schema).
  const Json schema = js->contains("schema") && !(*js)["schema"].is_null() ? (*js)["schema"] : Json::object();
  if (!schema.is_object()) {
    return FieldError("response_format.json_schema.schema", "'response_format.json_schema.schema' must be an object");
  }
  out->type = ResponseFormat::Type::kJsonSchema;
  out->name = name->get<std::string>();
  grammar::GrammarBuilder b;
  absl::StatusOr<grammar::RuleId> root = grammar::AddJsonSchema(schema, b, "schema");
  absl::StatusOr<grammar::Grammar> g = root.ok() ? b.Build(*root) : absl::StatusOr<grammar::Grammar>(root.status());
  if (!g.ok()) {
    return FieldError("response_format.json_schema.schema",
                      "'response_format.json_schema.schema' cannot be used for structured output: " +
                          std::string(g.status().message()));
  }
  out->grammar = std::make_shared<const grammar::Grammar>(std::move(*g));
  out->key = "json_schema:" + schema.dump();
  return std::nullopt;
}

absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> CompileResponseFormat(const ResponseFormat& format,
                                                                                      grammar::GrammarCache& cache) {
  if (format.type == ResponseFormat::Type::kText || format.grammar == nullptr) return nullptr;
  return cache.Get(format.key, *format.grammar);
}

std::optional<ApiError> ApplyResponseFormat(const ResponseFormat& format, grammar::GrammarCache* cache,
                                            engine::SamplingParams* params) {
  if (format.type == ResponseFormat::Type::kText) return std::nullopt;
  if (cache == nullptr) {
    return InvalidRequest("'response_format' needs the model's tokenizer, which this server has not loaded",
                          "response_format");
  }
  absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> g = CompileResponseFormat(format, *cache);
  if (!g.ok()) {
    return InvalidRequest("'response_format' cannot be used for structured output: " + std::string(g.status().message()),
                          "response_format");
  }
  params->grammar = *g;
  return std::nullopt;
}

std::unique_ptr<grammar::GrammarCache> MakeGrammarCache(const tokenizer::Tokenizer& tokenizer) {
  return std::make_unique<grammar::GrammarCache>(
      grammar::TokenVocabulary::FromTokenizer(tokenizer, tokenizer.vocab_size(), tokenizer.eos_token_ids()));
}

}  // namespace tandem::openai
