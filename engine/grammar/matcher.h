// One sequence's progress through a compiled grammar: which tokens may come next (FillMask),
// taking the one that came (AcceptToken), and whether the text so far is complete.
//
// FillMask = the union, over the state's top positions, of the cached accepted tokens, plus
// the cached uncertain tokens that the whole state accepts (compiled_grammar.h). eos ids are
// allowed exactly when the grammar can end; special tokens never.
//
// Budget: a grammar's text may need more tokens than max_tokens leaves. FitsBudget tells
// whether, after a token, the grammar can still be completed within the tokens left (one token
// per byte of the shortest completion, which byte-level vocabularies can always spell), and
// CompletionToken gives a token on that shortest completion; the engine uses them so that even
// a random model's output completes before max_tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/grammar/compiled_grammar.h"

namespace tandem::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Takes token `id` if the grammar allows it and returns true; else returns false and the
  // state is unchanged. An eos id is taken when the grammar can end, and terminates it.
  bool AcceptToken(int32_t id);
  // The same for raw bytes (tests, and text forced by a caller).
  bool AcceptBytes(std::string_view bytes);
  // Sets `mask` (TokenVocabulary::mask_words() words, bit id & 63 of word id >> 6) to the
  // tokens AcceptToken would take now.
  void FillMask(std::vector<uint64_t>* mask);

  // The text so far is complete: no byte may follow (or eos was taken).
  bool IsTerminated() const { return terminated_ || (state_.can_end && state_.tops.empty()); }
  // The text so far is a complete instance (eos may come now).
  bool CanEnd() const { return terminated_ || state_.can_end; }
  // The fewest bytes that still complete the text (0 when it can end).
  int64_t MinBytesToEnd() const;
  // Whether after token `id` (allowed now) the grammar can be completed within `tokens_after`
  // more tokens.
  bool FitsBudget(int32_t id, int64_t tokens_after);
  // A token that starts a shortest completion: eos when the grammar can end, else the
  // single-byte token of the completion's first byte; -1 if the vocabulary has none.
  int32_t CompletionToken() const;

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  // FillMask for a state not in recent_ (mask zeroed, the state not terminated).
  void ComputeMask(std::vector<uint64_t>* mask);
  // Sets in `mask` the uncertain tokens of string position entry `m` that a top at it with
  // stack node `parent` below takes.
  void CheckLeaving(const PositionMask& m, int32_t parent, std::vector<uint64_t>* mask);
  // Runs `bytes` from state_ into *out (false: some byte was not allowed).
  bool Run(std::string_view bytes, MatchState* out);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<StackNode> pool_;  // every stack node of this sequence (the state's tails)
  MatchState state_;
  bool terminated_ = false;
  std::vector<int32_t> uncertain_;        // FillMask scratch
  std::vector<MatchState> leave_states_;  // CheckLeaving scratch
  // The masks of the last few states, by the states' (position, parent node) pairs: inside a
  // string or a number every token leads back to the same state (tail calls keep the parent),
  // and its mask, uncertain tokens checked included, is then a copy.
  struct RecentMask {
    std::vector<std::pair<int32_t, int32_t>> key;  // sorted; (-1, -1) last when the state can end
    std::vector<uint64_t> mask;
  };
  std::vector<RecentMask> recent_;  // most recent last
  size_t recent_next_ = 0;
  static constexpr size_t kRecentMasks = 8;
};

}  // namespace tandem::grammar
