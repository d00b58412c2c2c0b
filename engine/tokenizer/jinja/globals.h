// The names every template sees: true/false/none (also True/False/None), range, namespace,
// raise_exception and strftime_now, as @huggingface/jinja defines them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/tokenizer/jinja/value.h"

namespace tandem::jinja {

// The prefix of the error raise_exception("...") returns, before the template's message.
inline constexpr char kRaisedPrefix[] = "template raised: ";

// Adds the globals to `vars`. Every namespace the template creates is also appended to
// `namespaces`, so the renderer can empty them when done (a namespace may hold itself).
// range() refuses to make more than `max_items` numbers.
void AddGlobals(absl::flat_hash_map<std::string, Value>* vars, std::vector<std::shared_ptr<Object>>* namespaces,
                size_t max_items);

}  // namespace tandem::jinja
