// Single-sequence generation on rank 0 through a StepDriver: prefill the prompt in one chunk,
// then one decode token per step; greedy or seeded temperature sampling; stops at eos ids.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/step_driver.h"

namespace tandem::engine {

struct GenerateOptions {
  int max_tokens = 16;
  float temperature = 0.0f;      // 0 = greedy (argmax, lowest id on a tie)
  uint64_t seed = 0;             // std::mt19937_64 seed when temperature > 0
  std::vector<int64_t> eos_ids;  // stop (the eos token is not returned)
  int32_t block_size = 16;       // KV block size when the driver has no pool yet
};

struct GenerateResult {
  std::vector<int32_t> token_ids;   // new tokens only
  std::string finish_reason;        // "stop" (eos) or "length"
  double prefill_seconds = 0;
  double decode_seconds = 0;        // steps after the first new token
  int decode_steps = 0;
  double decode_tokens_per_second() const { return decode_seconds > 0 ? decode_steps / decode_seconds : 0; }
};

// Picks the next token from one row of logits (vocab).
int32_t SampleToken(const float* logits, int64_t vocab, float temperature, std::mt19937_64& rng);

// Allocates a KV pool just large enough when the driver has none (or one too small).
absl::StatusOr<GenerateResult> Generate(StepDriver& driver, const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options);

// Logits at every position of `prompt` (rows = prompt length), in one prefill step.
absl::StatusOr<Logits> PromptLogits(StepDriver& driver, const std::vector<int32_t>& prompt,
                                    int32_t block_size = 16);

}  // namespace tandem::engine
