#include "engine/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/status.h"
#include "engine/kv_cache.h"

namespace tandem::engine {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Makes sure the driver's pool holds `tokens` positions (and the one state slot the sequence
// uses, slot 0, for a model with per-sequence state).
absl::Status EnsurePool(StepDriver& driver, int64_t tokens, int32_t block_size) {
  if (driver.kv_block_size() > 0) block_size = driver.kv_block_size();
  const int64_t blocks = (tokens + block_size - 1) / block_size;
  const int32_t slots = driver.model().kv_spec().has_state() ? 1 : 0;
  if (driver.num_kv_blocks() >= blocks && driver.num_state_slots() >= slots) return absl::OkStatus();
  return driver.AllocateKvCache(static_cast<int32_t>(blocks), block_size, slots);
}

}  // namespace

int32_t SampleToken(const float* logits, int64_t vocab, float temperature, std::mt19937_64& rng) {
  if (temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  // softmax(logits / T), then one draw from it.
  const float mx = *std::max_element(logits, logits + vocab);
  std::vector<double> p(vocab);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i] = std::exp((static_cast<double>(logits[i]) - mx) / temperature);
    sum += p[i];
  }
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (int64_t i = 0; i < vocab; ++i) {
    u -= p[i];
    if (u <= 0) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(vocab - 1);
}

absl::StatusOr<GenerateResult> Generate(StepDriver& driver, const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options) {
  if (prompt.empty()) return absl::InvalidArgumentError("generate: empty prompt");
  if (options.max_tokens < 0) return absl::InvalidArgumentError("generate: max_tokens < 0");
  GenerateResult result;
  result.finish_reason = "length";
  if (options.max_tokens == 0) return result;
  const int64_t total = static_cast<int64_t>(prompt.size()) + options.max_tokens;
  RETURN_IF_ERROR(EnsurePool(driver, total, options.block_size));

  BlockAllocator alloc(driver.num_kv_blocks());
  SeqChunk seq;
  seq.seq_id = 0;
  seq.tokens = prompt;
  seq.start_pos = 0;
  seq.want_logits = true;
  seq.state_slot = 0;
  RETURN_IF_ERROR(EnsureBlocks(alloc, driver.kv_block_size(), total, seq.block_table));

  std::mt19937_64 rng(options.seed);
  auto t0 = Clock::now();
  for (int i = 0; i < options.max_tokens; ++i) {
    StepBatch batch;
    batch.seqs.push_back(seq);
    ASSIGN_OR_RETURN(Logits logits, driver.Forward(batch));
    if (logits.rows() != 1) return absl::InternalError("generate: expected one row of logits on rank 0");
    const int32_t next = SampleToken(logits.row(0), logits.vocab, options.temperature, rng);
    if (i == 0) {
      result.prefill_seconds = SecondsSince(t0);
      t0 = Clock::now();
    } else {
      ++result.decode_steps;
    }
    if (std::find(options.eos_ids.begin(), options.eos_ids.end(), next) != options.eos_ids.end()) {
      result.finish_reason = "stop";
      break;
    }
    result.token_ids.push_back(next);
    seq.start_pos += static_cast<int32_t>(seq.tokens.size());
    seq.tokens = {next};
  }
  result.decode_seconds = SecondsSince(t0);
  if (result.decode_steps == 0) result.decode_seconds = 0;
  return result;
}

absl::StatusOr<Logits> PromptLogits(StepDriver& driver, const std::vector<int32_t>& prompt, int32_t block_size) {
  if (prompt.empty()) return absl::InvalidArgumentError("logits: empty prompt");
  RETURN_IF_ERROR(EnsurePool(driver, static_cast<int64_t>(prompt.size()), block_size));
  BlockAllocator alloc(driver.num_kv_blocks());
  SeqChunk seq;
  seq.tokens = prompt;
  seq.want_all_logits = true;
  seq.state_slot = 0;
  RETURN_IF_ERROR(EnsureBlocks(alloc, driver.kv_block_size(), static_cast<int64_t>(prompt.size()), seq.block_table));
  StepBatch batch;
  batch.seqs.push_back(std::move(seq));
  return driver.Forward(batch);
}

}  // namespace tandem::engine
