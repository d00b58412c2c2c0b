// Mask cache entries of the positions inside JSON string content, from buckets of the
// vocabulary instead of a walk of it (compiled_grammar.h).
//
// Inside a string nearly every token is accepted, so the cache walk follows ~147k Qwen3 tokens
// byte by byte: 10-40 ms per position, and a string with maxLength has its own positions for
// every number of characters left. But there the answer depends on little: a token is accepted
// when its bytes finish the character being written and then are whole JSON string characters
// (the last one possibly cut short) no more than the characters still allowed; it is uncertain
// (the stack below decides) when those characters are followed by a byte that may come after
// the string (the closing quote); else rejected. So the vocabulary is sorted once per tokenizer
// into, per place inside a character, the tokens by the number of characters they add, and a
// position's entry is a bitset copy plus the few tokens past the limit, in microseconds.
//
// Exact, not a heuristic: a rule gets this path only when its alternatives are exactly the
// flattened JsonStringChar pieces, each followed by the same tail (nothing, the next rule of a
// bounded repetition, or itself), and no character's first byte can follow the rule; the test
// compares every such position with the walk, bit for bit.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/vocabulary.h"

namespace tandem::grammar {

struct PositionMask;  // compiled_grammar.h

constexpr int32_t kUnboundedChars = std::numeric_limits<int32_t>::max();

// A byte-set position inside a string's characters: element `element` of the alternative that
// is JsonStringChar piece `piece`, with between `lo` and `hi` (kUnboundedChars: no limit)
// characters allowed after the one it is in.
struct StringPosition {
  int32_t piece = -1;  // -1: not such a position
  int32_t element = 0;
  int32_t lo = 0, hi = 0;
};

// The flattened alternatives of JsonStringChar (json_schema.h): each a sequence of byte sets.
const std::vector<std::vector<ByteSet>>& JsonCharPieces();

// Per position of `g` (indexed like g.elements), which ones are string content; `follow` is
// CompiledGrammar's per-rule follow sets.
std::vector<StringPosition> FindStringPositions(const Grammar& g, const std::vector<ByteSet>& follow);

// The buckets of one vocabulary (TokenVocabulary::string_content() builds them on first use).
class StringContentIndex {
 public:
  explicit StringContentIndex(const TokenVocabulary& vocab);

  // `at` with its limits brought within what this vocabulary's tokens can tell apart (a limit
  // above the most characters any token adds acts as none): positions whose canonical forms
  // are equal have the same entry.
  StringPosition Canonical(const StringPosition& at) const;

  // Sets *out to the mask cache entry of `at` in a rule whose follow set is `follow` (what
  // CompiledGrammar's walk computes, bit for bit).
  void Mask(const StringPosition& at, const ByteSet& follow, PositionMask* out) const;

 private:
  // The tokens that start by finishing the character at one (piece, element).
  struct Entry {
    std::vector<int32_t> ids_by_count;  // content-only tokens, by characters added (ascending)
    std::vector<int32_t> count_start;   // count c -> first index in ids_by_count; one extra at the end
    std::vector<uint64_t> all;          // bitset of ids_by_count
    struct Stop {
      int32_t rank;      // TokenVocabulary::rank
      int32_t chars;     // whole characters after the first one, before `next`
      int32_t at;        // the offset of `next` in the token
      uint8_t next;      // the byte that is not a character's start
    };
    std::vector<Stop> stops;  // by rank
    int32_t most_stopped = -1;  // the most `chars` of any stop
  };
  std::vector<std::vector<Entry>> entries_;  // [piece][element]
};

}  // namespace tandem::grammar
