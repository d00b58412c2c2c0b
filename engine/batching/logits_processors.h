// Changes to one row of logits before the sampler draws from it: logit_bias, the repetition
// penalty (Hugging Face), frequency and presence penalties (OpenAI), masking tokens (what
// min_tokens does to eos and stop tokens), and a grammar's mask (GrammarConstraint). The first
// are pure functions of (logits, settings, history), so each is tested against hand-computed rows.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/grammar/matcher.h"

namespace tandem::engine {

struct LogitAdjustments {
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias) added to the logit
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  float frequency_penalty = 0.0f;   // 0 = off
  float presence_penalty = 0.0f;    // 0 = off

  bool any() const {
    return !logit_bias.empty() || repetition_penalty != 1.0f || frequency_penalty != 0.0f ||
           presence_penalty != 0.0f;
  }
  bool penalties() const {
    return repetition_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f;
  }
};

// The tokens one sequence has seen, as the penalties count them.
struct TokenHistory {
  std::unordered_set<int32_t> prompt;                 // repetition_penalty only
  std::unordered_map<int32_t, int32_t> output_counts;  // generated tokens, stop tokens included
};

// In the order vLLM applies them: logit_bias added; then for every token of prompt or output,
// a positive logit divided by repetition_penalty and a negative one multiplied by it; then for
// every output token, count * frequency_penalty + presence_penalty subtracted. Token ids must be
// in [0, vocab) (the engine checks logit_bias at submission).
void AdjustLogits(float* logits, int64_t vocab, const LogitAdjustments& adjust, const TokenHistory& history);

// Sets the logits of `ids` to -infinity, so that no setting can draw them; ids outside
// [0, vocab) are skipped (an eos id the vocabulary does not have).
void MaskTokens(float* logits, int64_t vocab, const std::vector<int32_t>& ids);

// One sequence's grammar (SamplingParams::grammar): masks each row to the tokens the grammar
// allows, and keeps the text completable within max_tokens.
class GrammarConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> g) : matcher_(std::move(g)) {}

  // Sets the logits of the tokens the grammar does not allow now to -infinity. Ids at or above
  // the grammar's vocabulary are masked too.
  void MaskLogits(float* logits, int64_t vocab);
  // Takes the token drawn from the masked row. When the text could no longer be completed in
  // `tokens_after` more tokens after it, takes instead the most likely token of `masked_logits`
  // that still allows that (among the kBudgetCandidates best), else the first token of the
  // shortest completion. Returns the token taken.
  int32_t Accept(int32_t drawn, const float* masked_logits, int64_t vocab, int64_t tokens_after);
  // The text is complete and nothing may follow: the sequence ends.
  bool terminated() const { return matcher_.IsTerminated(); }

  static constexpr int kBudgetCandidates = 16;

 private:
  grammar::GrammarMatcher matcher_;
  std::vector<uint64_t> mask_;
};

}  // namespace tandem::engine
