// A Grammar (grammar.h) ready to constrain decoding over one vocabulary (vocabulary.h): the
// pushdown automaton the matcher runs, and a cache of token masks per grammar position.
//
// The automaton: a matcher state is a set of stacks; a stack is a chain of nodes (position,
// parent), the top node at a byte-set element and the nodes below it at the positions to return
// to. Stacks share their tails in a node pool. A rule reference in the last place of an
// alternative is a tail call (the caller's frame is dropped), so right recursion such as a
// string's characters keeps a constant stack.
//
// The mask cache (the idea of XGrammar's adaptive token mask cache): for a top position p, walk
// every token from a stack of p alone, whose bottom is a boundary. A token whose bytes all match
// without reaching the boundary is accepted from p whatever lies below; one that fails without
// reaching it is rejected whatever lies below; only tokens that reach the boundary (the rule of p
// ends inside the token) depend on the rest of the stack and are checked at run time. Computed on
// first use and kept; a few thousand tokens at most are left to check per step. Inside JSON
// string content the walk would take 10-40 ms per position for the same answer that buckets
// of the vocabulary give in microseconds (string_masks.h), so those positions take that path.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/string_masks.h"
#include "engine/grammar/vocabulary.h"

namespace tandem::grammar {

// One frame of a stack.
struct StackNode {
  int32_t pos;     // index into Grammar::elements
  int32_t parent;  // node below, or kRootParent / kBoundaryParent
};
constexpr int32_t kRootParent = -1;      // popping it ends the grammar
constexpr int32_t kBoundaryParent = -2;  // the mask cache's unknown rest of the stack

// The top nodes of a matcher state (each at a byte-set element) and what it may do next.
struct MatchState {
  std::vector<int32_t> tops;  // node ids, distinct (position, parent)
  bool can_end = false;       // a stack popped its last frame: the grammar may end here
  bool crossed = false;       // a stack popped a kBoundaryParent (mask cache walks only)
  bool matched = false;       // Advance: some top took the byte (tops may still be empty)
};

// What a token does from a state.
enum class TokenResult : uint8_t { kAccepted, kRejected, kUncertain };

// What one grammar position accepts, from the mask cache.
struct PositionMask {
  std::vector<uint64_t> accepted;     // bit per token id: accepted whatever the stack below
  // A stored entry that accepts few tokens keeps their ids here instead (ascending; `accepted`
  // then empty): most positions outside strings accept a handful of the 151k.
  std::vector<int32_t> accepted_ids;
  std::vector<int32_t> uncertain;     // ranks (TokenVocabulary::rank), ascending: need the stack
  // String content positions only (else empty): per uncertain token, the offset of its first
  // byte after the string's characters. Such a token is taken exactly when its bytes from
  // there are taken after the string's rule ends (GrammarMatcher checks each such rest once).
  std::vector<int32_t> leave;

  // ORs the accepted tokens into `mask` (a bit per token id).
  void AddAcceptedTo(std::vector<uint64_t>* mask) const;
  // Turns `accepted` into `accepted_ids` when it has at most `most` tokens.
  void MakeSparse(size_t most);
  // Whether the accepted tokens are kept as ids (a bitset has a word per 64 tokens, never none).
  bool sparse() const { return accepted.empty(); }
};

class CompiledGrammar {
 public:
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(Grammar grammar,
                                                                        std::shared_ptr<const TokenVocabulary> vocab);

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }

  // The state at the start: the closure of the root rule's alternatives.
  MatchState Start(std::vector<StackNode>* pool) const;
  // The state that returning to stack node `node` gives (the tops reachable from it without
  // consuming a byte), as when the rule above it ends. New nodes are appended to `pool`.
  MatchState Resume(int32_t node, std::vector<StackNode>* pool) const;
  // The state after `byte` from `from` (tops empty: the byte is not allowed). New nodes are
  // appended to `pool`.
  void Advance(const MatchState& from, uint8_t byte, std::vector<StackNode>* pool, MatchState* to) const;
  // The fewest bytes that complete the grammar from a state (0 when it can end now), and one
  // byte that starts such a shortest completion (-1 when it can end now or never).
  int64_t MinBytesToEnd(const MatchState& s, const std::vector<StackNode>& pool, int* first_byte) const;

  // Walks tokens from `start` in the vocabulary's sorted order, sharing the states of common
  // prefixes, and calls visit(rank, result) for each token that is not rejected: `ranks`
  // ascending (nullptr: every generable token, skipping the tokens of a rejected prefix
  // without looking at them). kUncertain: no path consumed the token, but one reached a
  // kBoundaryParent before a byte in `follow` (nullptr: any byte) of the token.
  void WalkTokens(const MatchState& start, std::vector<StackNode>* pool, const std::vector<int32_t>* ranks,
                  const ByteSet* follow, absl::FunctionRef<void(int32_t rank, TokenResult result)> visit) const;

  // The mask cache entry of byte-set position `pos`, computed on first use (thread-safe). At
  // most kMaxStoredMasks entries are kept (each is a bit per token, 19 KB for Qwen3); beyond
  // that an entry is computed each time into a per-thread slot, valid until this thread's next
  // MaskAt. String positions with the same entry share it: a long bounded string reaches new
  // positions at every token, but while more characters are left than any token holds, they
  // all have the entries of the first ones.
  const PositionMask& MaskAt(int32_t pos) const;
  static constexpr size_t kMaxStoredMasks = 1024;
  static constexpr size_t kCompiledMasks = 512;
  static constexpr size_t kSparseIds = 1024;  // PositionMask::MakeSparse below this many tokens

  // The entry of `pos` by walking the vocabulary: what MaskAt computes, except inside JSON
  // string content (IsStringContent), where MaskAt reads the vocabulary's buckets
  // (string_masks.h) for the same result. Tests compare the two.
  PositionMask WalkMask(int32_t pos) const;
  bool IsStringContent(int32_t pos) const { return strings_[pos].piece >= 0; }
  // How many entries are stored. Compile makes those of every position outside string content
  // (at most kCompiledMasks), so that a request's decode steps find them; entries of string
  // content are made when first reached (microseconds each) and shared.
  size_t StoredMasks() const {
    std::lock_guard<std::mutex> l(mu_);
    return stored_;
  }

 private:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab);
  // Adds the tops reachable from `node` without consuming a byte to `out`.
  void Expand(int32_t node, std::vector<StackNode>* pool, MatchState* out, std::vector<StackNode>* seen) const;
  PositionMask ComputeMask(int32_t pos) const;
  void ComputeFollowSets();

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int64_t> min_rest_;  // per position: fewest bytes to the end of its alternative
  std::vector<int64_t> rule_min_;  // per rule: fewest bytes it matches
  std::vector<RuleId> owner_;      // per position: its rule
  // Per rule: the bytes that can come right after it ends, anywhere in the grammar. A token that
  // leaves the rule of the cached position and goes on with another byte is only uncertain when
  // that byte can follow (a string's closing quote followed by ')' is rejected at once).
  std::vector<ByteSet> follow_;
  std::vector<StringPosition> strings_;  // per position (StringContentIndex::Canonical)
  std::vector<int32_t> shared_;          // per position: its entry in shared_masks_, or -1
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<PositionMask>> masks_;         // per position, null until computed
  mutable std::vector<std::unique_ptr<PositionMask>> shared_masks_;  // string positions' entries
  mutable size_t stored_ = 0;  // non-null entries of masks_ and shared_masks_
};

}  // namespace tandem::grammar
