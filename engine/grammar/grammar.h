// A context-free grammar over bytes, as constrained decoding uses it (response_format, tool
// calls): built with GrammarBuilder from expressions (literals, byte and UTF-8 character classes,
// sequences, alternatives, repetition, references to named rules, recursion included), then
// flattened by Build into a Grammar: every rule a list of alternatives, every alternative a
// sequence of elements, each element a byte set or a rule reference, optionally repeated
// (optional or any number of times). The matcher (matcher.h) walks that flat form as a
// pushdown automaton; left recursion is refused by Build because such a walk would not end.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::grammar {

using RuleId = int32_t;

// A set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  bool operator==(const ByteSet& o) const { return bits == o.bits; }
};

// How many times an element matches in a row.
enum class Repetition : uint8_t { kOne, kOptional, kStar };

// One element of a flat alternative.
struct Element {
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = Kind::kEnd;
  Repetition repeat = Repetition::kOne;
  int32_t arg = -1;  // kBytes: index into Grammar::byte_sets; kRule: the rule; kEnd: the rule it ends
};

// The flat grammar. The alternatives of every rule are stored back to back in `elements`, each
// ending in a kEnd element; a position is an index into `elements`.
struct Grammar {
  struct Rule {
    std::string name;
    std::vector<int32_t> alternatives;  // index of each alternative's first element
  };
  std::vector<ByteSet> byte_sets;
  std::vector<Element> elements;
  std::vector<Rule> rules;
  RuleId root = -1;

  // The grammar in an EBNF-like notation, one rule a line (for errors and tests).
  std::string ToString() const;
};

// An expression of a grammar under construction (an index into its builder).
struct Expr {
  int32_t id = -1;
};

// Builds a Grammar. Expressions are values: one may be used in several places. Rules are
// declared by name first (so that they can refer to each other and to themselves) and defined
// once. Not thread-safe.
class GrammarBuilder {
 public:
  // A new rule named `name` (or `name` with a numeric suffix when that name is taken), to be
  // defined later with Define.
  RuleId AddRule(std::string_view name);
  // The body of `rule`; InvalidArgument when it is already defined.
  absl::Status Define(RuleId rule, Expr body);
  const std::string& RuleName(RuleId rule) const { return rules_[rule].name; }

  Expr Ref(RuleId rule);
  Expr Empty();                        // matches the empty string
  Expr Literal(std::string_view bytes);  // these bytes, in order (empty: Empty())
  // One byte in [lo, hi] of any of `ranges` (or of none of them when `negated`).
  Expr Bytes(const std::vector<std::pair<uint8_t, uint8_t>>& ranges, bool negated = false);
  // One UTF-8 encoded code point in any of the inclusive `ranges` (or, `negated`, in none of
  // them); surrogates (U+D800..U+DFFF) and values above U+10FFFF are never matched, so what
  // matches is always valid UTF-8.
  Expr Chars(const std::vector<std::pair<char32_t, char32_t>>& ranges, bool negated = false);
  Expr Seq(std::vector<Expr> items);
  Expr Alt(std::vector<Expr> items);
  Expr Optional(Expr e);
  Expr Star(Expr e);
  Expr Plus(Expr e);
  // `e` at least `min` and at most `max` times; max < 0 means no upper bound. Bounds above
  // kMaxRepeat are refused by Build (each counted repetition becomes a position).
  Expr Repeat(Expr e, int32_t min, int32_t max);
  static constexpr int32_t kMaxRepeat = 10000;

  // The flat grammar with `root` as its start. InvalidArgument for a rule declared but not
  // defined, left recursion (a rule that can reach itself without consuming a byte), a repeat
  // bound out of range.
  absl::StatusOr<Grammar> Build(RuleId root) const;

 private:
  friend class GrammarFlattener;
  struct Node {
    enum class Kind : uint8_t { kEmpty, kLiteral, kBytes, kRef, kSeq, kAlt, kRepeat };
    Kind kind = Kind::kEmpty;
    std::string literal;
    ByteSet bytes;
    RuleId rule = -1;
    std::vector<int32_t> items;  // kSeq / kAlt children; kRepeat: the one repeated child
    int32_t min = 0, max = 0;    // kRepeat; max < 0: unbounded
  };
  struct RuleDecl {
    std::string name;
    int32_t body = -1;  // node index; -1 until defined
  };
  Expr Add(Node n);

  std::vector<Node> nodes_;
  std::vector<RuleDecl> rules_;
};

}  // namespace tandem::grammar
