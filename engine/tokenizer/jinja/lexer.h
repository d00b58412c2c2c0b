// Template text to tokens, as @huggingface/jinja's lexer does it with the options transformers
// uses (trim_blocks and lstrip_blocks on): the one trailing newline is dropped, blanks before a
// block tag at the start of a line are dropped, the newline after a block tag is dropped, `-`
// inside a tag strips the whitespace on that side, and transformers' {% generation %} tags are
// removed. Every token carries the line it starts on in the original text, for error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::jinja {

enum class TokenType {
  kText,
  kNumber,      // 12, 1.5, -3 (a sign right after an operator or bracket is part of the literal)
  kString,      // value with escapes resolved
  kIdentifier,  // names and keywords (if, for, in, not, true, ...)
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,   // {%
  kCloseStatement,  // %}
  kOpenExpression,  // {{
  kCloseExpression,  // }}
  kOpenBracket,
  kCloseBracket,
  kOpenBrace,
  kCloseBrace,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // + - standing alone before an operand
  kComment,
};

struct Token {
  TokenType type;
  std::string value;
  int line = 1;
};

const char* TokenTypeName(TokenType t);

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexOptions& options = {});

}  // namespace tandem::jinja
