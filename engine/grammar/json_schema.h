// JSON and JSON Schema as grammar rules (grammar.h): what response_format json_object /
// json_schema and a tool call's arguments are constrained to.
//
// The JSON produced is compact with limited whitespace: one optional space after ':' and ','
// and nowhere else, so that a model (even one with random weights) cannot spend its tokens on
// blanks, and object members come in the order the schema lists them.
//
// Supported keywords: type (one or a list), properties, required, additionalProperties (false,
// true or a schema; with properties, only the listed ones are generated), enum, const, anyOf,
// oneOf (as anyOf: alternatives whose instances overlap are refused, since the grammar could
// not keep exactly one of them valid), allOf with one member, $ref to "#" or "#/$defs/..." /
// "#/definitions/...", items, minItems, maxItems, minLength, maxLength, minimum 0 (numbers,
// integers) or 1 (integers), and the annotations title, description, default, examples,
// $schema, $id, $comment, deprecated, readOnly, writeOnly (no effect). Every other keyword
// (pattern, format, maximum, multipleOf, exclusiveMinimum, uniqueItems, prefixItems, not,
// if/then/else, patternProperties, ...) is refused with InvalidArgument naming it and where it
// is, never silently ignored.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar.h"
#include "nlohmann/json_fwd.hpp"

namespace tandem::grammar {

// The schema is an ordered_json so that properties keep the order the client wrote them in.
// Defines a new rule (named `rule_name`, or that name with a suffix when taken) that matches
// exactly the JSON texts valid against `schema`, and returns it. Helper rules are added under
// the same name prefix. InvalidArgument with a JSON pointer to the offending place
// ("/properties/age: unsupported keyword \"pattern\"") for what cannot be compiled.
absl::StatusOr<RuleId> AddJsonSchema(const nlohmann::ordered_json& schema, GrammarBuilder& builder,
                                     std::string_view rule_name);

// One character of a JSON string: any valid UTF-8 code point but '"', '\\' and control
// characters, or an escape (\" \\ \/ \b \f \n \r \t, \u and four hex digits).
Expr JsonStringChar(GrammarBuilder& builder);

// A rule matching any JSON value (object, array, string, number, true, false, null), nested to
// any depth.
RuleId AddAnyJson(GrammarBuilder& builder, std::string_view rule_name);

// A rule matching any JSON object (response_format {"type": "json_object"}).
RuleId AddAnyJsonObject(GrammarBuilder& builder, std::string_view rule_name);

}  // namespace tandem::grammar
