// Tokens to a syntax tree, with the grammar and operator precedence of @huggingface/jinja (which
// differ from Python Jinja in places: `not a == b` is `not (a == b)`, tests bind tighter than
// `*`). Everything is checked here, before rendering: an unknown statement, filter or test, or
// nesting beyond the limit fails with the construct and its line named.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/lexer.h"

namespace tandem::jinja {

// Deepest nesting of expressions and blocks a template may have: bounds the recursion of the
// parser and of the interpreter that walks the tree.
inline constexpr int kMaxNesting = 64;

// The statements of the template, in order.
absl::StatusOr<std::vector<NodePtr>> Parse(const std::vector<Token>& tokens);

}  // namespace tandem::jinja
