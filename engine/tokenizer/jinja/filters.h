// Built-in filters (`x | name(args)`) and tests (`x is name`). Where @huggingface/jinja has a
// filter or test, it behaves exactly as there (the reference renders real chat templates with
// it); the others that templates in the wild use (round, select, wordcount, ...) follow Python
// Jinja. A name outside these lists is refused when the template is parsed.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/jinja/value.h"

namespace tandem::jinja {

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);

// `with_parens`: written `x|name(...)` rather than `x|name` (a few filters differ, as in the
// reference).
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& operand, const CallArgs& args, bool with_parens);
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& operand, const std::vector<Value>& args);

// Ordering for sort and dictsort: numbers (and booleans) with numbers, strings with strings
// (case-insensitively unless asked), none with none; anything else is an error. <0, 0, >0.
absl::StatusOr<int> CompareValues(const Value& a, const Value& b, bool case_sensitive);
// Stable sort by key(item) with CompareValues; the first comparison error is returned.
absl::Status SortValues(std::vector<Value>* items, const std::function<Value(const Value&)>& key, bool case_sensitive,
                        bool reverse);
// item.a.b / item.0 as sort(attribute=...) and map(attribute=...) look it up; undefined if absent.
Value AttributePath(const Value& item, std::string_view path);

}  // namespace tandem::jinja
