// JSON in and out of template values. Out: the `tojson` filter and the printing of lists and dicts,
// in the exact format of @huggingface/jinja (Python json.dumps defaults: ", " and ": "; with an
// indent "," and ": " and a newline per item; key order as inserted; non-ASCII kept unless
// ensure_ascii). In: the render context (messages, tools, ...), converted as JavaScript's
// JSON.parse + the reference's value conversion would (whole numbers become integers, keys that
// are array indices come first, in ascending order, as in any JavaScript object).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "engine/tokenizer/jinja/value.h"

namespace tandem::jinja {

// Containers nested deeper than this are refused (cyclic namespaces, hostile input).
inline constexpr int kMaxJsonDepth = 256;

struct JsonOptions {
  int indent = 0;  // > 0: pretty-print with this many spaces per level
  bool ensure_ascii = false;
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool sort_keys = false;
  // tojson writes undefined as null; printing a list writes "undefined" as JavaScript does.
  bool undefined_as_null = true;
};

absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options);
// Never fails: what a value prints as where JavaScript would print something (functions print as
// "[function]", nesting beyond kMaxJsonDepth is cut with "...").
std::string ToJsonLenient(const Value& v, const JsonOptions& options);

absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& j);

}  // namespace tandem::jinja
