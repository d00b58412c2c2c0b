// Attribute and subscript access (`x.name`, `x[key]`, `x[i]`, `x[a:b:c]`) and the built-in
// methods it can return, bound to their object: str.upper/lower/strip/lstrip/rstrip/title/
// capitalize/startswith/endswith/split/replace, dict.get/items/keys/values/dictsort, and the
// `length` property of strings and lists. As in @huggingface/jinja, strip() and friends take no
// characters argument (they strip whitespace whatever is passed), and a missing attribute or key is
// undefined rather than an error.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/jinja/value.h"

namespace tandem::jinja {

absl::StatusOr<Value> GetMember(const Value& object, const Value& property);
// The characters (code points) of a string, each as a string value: what indexing, slicing and
// looping over a string see.
std::vector<Value> Characters(const std::string& s);
// Python slicing of a list or string (code points); undefined bounds take their defaults.
absl::StatusOr<Value> SliceValue(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace tandem::jinja
