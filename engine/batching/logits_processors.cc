#include "engine/batching/logits_processors.h"

#include <algorithm>
#include <limits>

namespace tandem::engine {

void AdjustLogits(float* logits, int64_t vocab, const LogitAdjustments& a, const TokenHistory& h) {
  for (const auto& [id, bias] : a.logit_bias) {
    if (id >= 0 && id < vocab) logits[id] += bias;
  }
  if (a.repetition_penalty != 1.0f) {
    // A token seen in both the prompt and the output is penalised once, as in Hugging Face
    // (where the penalty gathers over the set of ids).
    auto penalise = [&](int32_t id) {
      if (id < 0 || id >= vocab) return;
      float& l = logits[id];
      l = l > 0.0f ? l / a.repetition_penalty : l * a.repetition_penalty;
    };
    for (int32_t id : h.prompt) penalise(id);
    for (const auto& [id, count] : h.output_counts) {
      if (h.prompt.count(id) == 0) penalise(id);
    }
  }
  if (a.frequency_penalty != 0.0f || a.presence_penalty != 0.0f) {
    for (const auto& [id, count] : h.output_counts) {
      if (id < 0 || id >= vocab || count <= 0) continue;
      logits[id] -= static_cast<float>(count) * a.frequency_penalty + a.presence_penalty;
    }
  }
}

void MaskTokens(float* logits, int64_t vocab, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    if (id >= 0 && id < vocab) logits[id] = -std::numeric_limits<float>::infinity();
  }
}

void GrammarConstraint::MaskLogits(float* logits, int64_t vocab) {
  matcher_.FillMask(&mask_);
  const int64_t covered = std::min<int64_t>(vocab, static_cast<int64_t>(mask_.size()) * 64);
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  // Whole words at once where the mask is all one way; else only the masked bits (a string's
  // mask allows nearly every token, a structural one nearly none).
  for (int64_t w = 0; w * 64 < covered; ++w) {
    const int64_t base = w * 64;
    const int64_t n = std::min<int64_t>(64, covered - base);
    uint64_t masked = ~mask_[w];
    if (n < 64) masked &= (uint64_t{1} << n) - 1;
    if (masked == 0) continue;
    if (masked == ~uint64_t{0}) {
      std::fill(logits + base, logits + base + 64, kMasked);
      continue;
    }
    for (; masked != 0; masked &= masked - 1) logits[base + __builtin_ctzll(masked)] = kMasked;
  }
  for (int64_t id = covered; id < vocab; ++id) logits[id] = kMasked;
}

int32_t GrammarConstraint::Accept(int32_t drawn, const float* masked_logits, int64_t vocab, int64_t tokens_after) {
  int32_t token = drawn;
  if (!matcher_.FitsBudget(token, tokens_after)) {
    // The best few allowed tokens by logit, then the shortest completion's next token (which
    // always fits while the budget held before this step).
    std::vector<int32_t> order;
    for (int64_t id = 0; id < vocab; ++id) {
      if (masked_logits[id] != -std::numeric_limits<float>::infinity()) order.push_back(static_cast<int32_t>(id));
    }
    const size_t k = std::min<size_t>(order.size(), kBudgetCandidates);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return masked_logits[a] != masked_logits[b] ? masked_logits[a] > masked_logits[b] : a < b;
    });
    token = -1;
    for (size_t i = 0; i < k && token < 0; ++i) {
      if (matcher_.FitsBudget(order[i], tokens_after)) token = order[i];
    }
    if (token < 0) token = matcher_.CompletionToken();
    if (token < 0) token = drawn;  // a vocabulary without single-byte tokens: max_tokens cuts it
  }
  matcher_.AcceptToken(token);
  return token;
}

}  // namespace tandem::engine
