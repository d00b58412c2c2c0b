// The request's response_format (chat completions; completions too, as vLLM accepts it) as a
// grammar for constrained decoding (engine/grammar):
//   {"type": "text"}                                  no constraint
//   {"type": "json_object"}                           any JSON object
//   {"type": "json_schema", "json_schema": {"name", "description"?, "schema"?, "strict"?}}
//                                                     JSON valid against the schema
// The schema is compiled when the request is parsed, so what it cannot be constrained to (an
// unsupported keyword, a bad $ref) is a 400 naming response_format.json_schema.schema and the
// place in it, never ignored. strict false is constrained the same as strict true.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/batching/llm_engine.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_cache.h"
#include "nlohmann/json.hpp"

namespace tandem::openai {

struct ApiError;  // openai/openai_protocol.h (which holds a ResponseFormat in its requests)

struct ResponseFormat {
  enum class Type { kText, kJsonObject, kJsonSchema };
  Type type = Type::kText;
  std::string name;                                 // json_schema.name
  std::shared_ptr<const grammar::Grammar> grammar;  // null for kText
  std::string key;                                  // the grammar's cache key: type + schema text
};

// Reads `value` (the response_format field, not null) into *out; a 400 ApiError whose param
// names the offending field otherwise.
std::optional<ApiError> ParseResponseFormat(const nlohmann::ordered_json& value, ResponseFormat* out);

// The compiled grammar of a parsed format for `cache`'s vocabulary (null for kText): what goes
// into SamplingParams::grammar.
absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> CompileResponseFormat(const ResponseFormat& format,
                                                                                      grammar::GrammarCache& cache);

// The server's step: `params->grammar` from the format (left alone for text). `cache` null (a
// server without a tokenizer cannot map bytes to tokens) refuses a JSON format with a 400.
std::optional<ApiError> ApplyResponseFormat(const ResponseFormat& format, grammar::GrammarCache* cache,
                                            engine::SamplingParams* params);

// The cache a server keeps for its tokenizer's vocabulary (eos: the tokenizer's eos ids).
std::unique_ptr<grammar::GrammarCache> MakeGrammarCache(const tokenizer::Tokenizer& tokenizer);

}  // namespace tandem::openai
