#include "engine/batching/logits_processors.h"

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

}  // namespace tandem::engine
