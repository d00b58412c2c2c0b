// The syntax tree of a template. One node type with a kind; what each field means per kind is
// listed below (unused fields stay empty). Built by parser.cc, walked by interpreter.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace tandem::jinja {

enum class NodeKind {
  // Expressions.
  kIdentifier,  // text: name
  kInteger,     // number
  kFloat,       // number
  kString,      // text
  kArray,       // list: items
  kTuple,       // list: items
  kDict,        // list: keys, list2: values
  kBinary,      // text: operator (and, or, ==, in, not in, +, ~, ...), a, b
  kUnary,       // text: not, -, +; a
  kMember,      // a: object, b: property, flag: computed (a[b]) rather than a.b
  kSlice,       // a: start, b: stop, c: step (each may be null); only as a kMember property
  kCall,        // a: callee, list: arguments
  kFilter,      // a: operand (null in a filter block), text: filter name, list: arguments,
                // flag: written with parentheses
  kTest,        // a: operand, text: test name, flag: negated (is not), list: arguments
  kTernary,     // a: condition, b: value if true, c: value if false
  kSelect,      // a: value, b: condition (`a if b` without else: undefined when false)
  kKeyword,     // text: keyword name, a: value (in calls); a parameter default (in macros)
  kSpread,      // a: *list argument
  kKeywordSpread,  // a: **dict argument
  // Statements.
  kText,      // text: literal output
  kOutput,    // a: expression to print ({{ a }})
  kIf,        // a: condition, list: body, list2: else body (an elif is a nested kIf there)
  kFor,       // a: target (identifier or tuple), b: iterable, c: `if` filter (may be null),
              // list: body, list2: else body
  kSet,       // a: target (identifier, tuple, or member of a namespace), b: value (null for
              // a block set), list: block body
  kMacro,     // text: name, list2: parameters (identifiers or keywords with defaults), list: body
  kCallBlock,  // a: the kCall of the macro, list2: caller parameters, list: body
  kFilterBlock,  // a: the kFilter (no operand), list: body
  kBreak,
  kContinue,
};

struct Node {
  NodeKind kind;
  int line = 0;
  std::string text;
  double number = 0;
  bool flag = false;
  std::unique_ptr<Node> a, b, c;
  std::vector<std::unique_ptr<Node>> list, list2;
};

using NodePtr = std::unique_ptr<Node>;

}  // namespace tandem::jinja
