// The serving engine on rank 0: accepts generation requests, runs continuous batching over the
// StepDriver (which makes every TP rank run the same step), samples, detokenizes, and reports
// tokens to each request's callback. The OpenAI HTTP layer (openai_server) sits on top of it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/batching/logprobs.h"  // TokenLogprob
#include "engine/batching/request_metrics.h"
#include "engine/step_driver.h"

namespace tandem::tokenizer {
class Tokenizer;  // engine/tokenizer/tokenizer.h
}  // namespace tandem::tokenizer
namespace tandem::grammar {
class CompiledGrammar;  // engine/grammar/compiled_grammar.h
}  // namespace tandem::grammar

namespace tandem::engine {

using tokenizer::Tokenizer;

struct SamplingParams {
  float temperature = 1.0f;             // 0 = greedy
  int32_t top_k = 0;                    // 0 = off
  float top_p = 1.0f;                   // 1 = off
  std::optional<uint64_t> seed;         // same seed + same prompt -> same output
  int32_t max_tokens = 16;
  std::vector<int32_t> stop_token_ids;  // in addition to the model's eos ids (unless ignore_eos)
  std::vector<std::string> stop;        // stop strings (not included in the output text)
  bool ignore_eos = false;              // eos does not end the sequence (it is output as a token)
  float min_p = 0.0f;                   // [0, 1]; 0 = off (engine/batching/sampler.h)
  // Before the draw (engine/batching/logits_processors.h): bias by token id in [-100, 100],
  // OpenAI's penalties in [-2, 2] over generated tokens, Hugging Face's repetition penalty (> 0)
  // over prompt and generated tokens.
  std::vector<std::pair<int32_t, float>> logit_bias;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  // eos and stop_token_ids cannot be drawn before this many tokens (as vLLM: stop strings still
  // end the sequence). At most max_tokens.
  int32_t min_tokens = 0;
  // Log-probabilities of each generated token (GenerationEvent::logprobs): -1 = off; 0..20
  // (kMaxLogprobs) = the sampled token's logprob plus that many most likely alternatives. They
  // are the model's own distribution, log_softmax of the raw logits, before logit_bias, penalties,
  // masks, temperature and truncation: vLLM's default logprobs_mode "raw_logprobs", and what
  // OpenAI reports. Greedy and sampled requests get the same numbers. Nothing is computed when off.
  int32_t logprobs = -1;
  // The same for the prompt's tokens (GenerationEvent::prompt_logprobs, for completions' echo):
  // -1 = off; 0..20 alternatives. The prefill then returns a row of logits per prompt token, in
  // chunks of at most 256 tokens.
  int32_t prompt_logprobs = -1;
  // Constrained decoding (response_format, forced tool calls): only tokens the grammar allows
  // are drawn, eos only where the text is complete, and the sequence ends ("stop") when the
  // grammar does; near max_tokens the draw keeps to tokens that still let the text complete
  // (engine/batching/logits_processors.h GrammarConstraint). Compiled for the model's vocabulary;
  // null = none.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

inline constexpr int32_t kMaxLogprobs = 20;
inline constexpr int32_t kMaxChoices = 128;

struct GenerationRequest {
  std::string request_id;
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  bool priority = false;  // probes: scheduled ahead of waiting requests
  // Completions of the one prompt (OpenAI's `n`), 1..kMaxChoices. The prompt is prefilled once;
  // each choice's first token is drawn from that prefill's logits, then the choices run as
  // sequences that share the prompt's full KV blocks (each recomputes the prompt's last partial
  // block into a block of its own). Choice i draws with seed + i (a request without a seed gets a
  // random one), so choice 0 is what n = 1 gives and every choice is reproducible. Models with
  // per-sequence state (the hybrids) cannot share it yet: their choices 1.. prefill the prompt
  // again, each in its own state slot.
  int32_t n = 1;
};

// Events of one request, each for one choice (`choice`, 0..n-1; always 0 when n = 1). Per choice:
// one event per new token (text_delta may be empty while a UTF-8 sequence or a possible stop
// string is held back), then its final event with `choice_finished` and finish_reason set. The
// final event carries no tokens and no text: text held back until the end (an incomplete UTF-8
// tail, a partial stop string that did not complete) comes in one more non-final event, possibly
// without tokens. Stop tokens (eos, stop_token_ids) are not in token_ids nor in the text, but
// count in completion_tokens (they were generated). The events of different choices interleave.
// The request's last event is the last choice's final event, the only one with `finished` set:
// it carries the usage of the whole request. With n = 1 the one final event has both flags.
// With SamplingParams::prompt_logprobs >= 0 the request's first event (choice 0, no tokens)
// carries prompt_logprobs.
struct GenerationEvent {
  int32_t choice = 0;
  std::vector<int32_t> token_ids;  // new tokens in this event
  // With SamplingParams::logprobs >= 0: one entry per token_ids entry, in the same order.
  std::vector<TokenLogprob> logprobs;
  // With SamplingParams::prompt_logprobs >= 0, once: entries for prompt tokens 1..P-1 (the first
  // prompt token has no logprob: nothing precedes it).
  std::vector<TokenLogprob> prompt_logprobs;
  std::string text_delta;
  bool choice_finished = false;    // this choice's final event
  bool finished = false;           // the request's last event (every choice has finished)
  std::string finish_reason;       // on choice_finished: "stop" | "length" | "abort" | "error"
  absl::Status error;              // set when finish_reason == "error"
  int64_t prompt_tokens = 0;       // usage, filled on the `finished` event: the prompt once,
  int64_t completion_tokens = 0;   // and the tokens of every choice together
};

using GenerationCallback = std::function<void(const GenerationEvent&)>;

// What one engine step did (EngineOptions::on_step), for step-time histograms.
struct StepMetrics {
  int64_t iteration = 0;       // 1 for the first step
  double seconds = 0;          // the Forward call on every rank (plan broadcast included)
  int64_t batch_tokens = 0;    // tokens computed in the step
  int64_t prefill_tokens = 0;  // of which prompt (or recompute) tokens
  int64_t decode_tokens = 0;   // of which one-token decode chunks
  int32_t num_seqs = 0;        // sequences in the step
  int32_t num_preempted = 0;   // sequences preempted while planning it
};

struct EngineOptions {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;   // per step; prefill is chunked to fit
  int32_t max_model_len = 4096;            // prompt + max_tokens
  int32_t block_size = 16;
  // KV pool size: explicit token count wins; else memory_fraction (0 = the backend's default,
  // 0.70 cpu / 0.90 cuda; else in (0, 1]) of this machine's MemAvailable (cpu, after loading)
  // or of the device's total memory minus what is already in use (cuda), divided by bytes per
  // token (engine/batching/kv_sizing.h).
  int64_t kv_tokens = 0;
  double memory_fraction = 0;
  std::string backend = "cpu";             // the model's backend: which memory sizes the pool
  int32_t max_waiting = 256;               // admission: more queued requests -> overloaded (503/429)
  // Runs on the engine thread after every step, before its tokens reach the callbacks; must not
  // block. Empty = none.
  std::function<void(const StepMetrics&)> on_step;
  // Runs on the engine thread as each request (each choice of one) finishes, before its final
  // event: the phases of engine/batching/request_metrics.h. Must not block.
  std::function<void(const RequestMetrics&)> on_finish;
  // Runs on the engine thread at every turn of its loop: after each step and at least once a
  // second while idle (the worker heartbeat). A sign of life of that thread itself, for the
  // systemd watchdog; must not block.
  std::function<void()> on_turn;
};

struct EngineStats {
  int64_t iterations = 0;         // steps run (liveness: moves while work is queued)
  int32_t running = 0;
  int32_t waiting = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_tokens_total = 0;
  int32_t state_slots_total = 0;  // per-sequence state slots (hybrid models); 0 = the model keeps none
  int32_t state_slots_used = 0;   // held by running sequences
  int32_t block_size = 0;         // tokens per KV block
  std::string kv_cache_dtype;     // the KV elements' type ("f32", "bf16", "fp8")
  int64_t preemptions = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
};

class LLMEngine {
 public:
  virtual ~LLMEngine() = default;
  // `driver` (rank 0 of the group) and `tokenizer` (may be null: no text, no stop strings) are
  // not owned. Sizes and allocates the KV pool and, for models with per-sequence state, the state
  // slots (engine/batching/kv_sizing.h); logs "KV pool: N tokens (G GiB per rank, ...)[ + S state
  // slots (G GiB per rank)] from ...". A model with state never runs more requests than slots.
  static absl::StatusOr<std::unique_ptr<LLMEngine>> Create(StepDriver* driver, const Tokenizer* tokenizer,
                                                           const EngineOptions& options);
  // Validates (InvalidArgument: empty prompt, token id outside the vocabulary, prompt + max_tokens
  // > max_model_len, n, logprobs or prompt_logprobs out of range; ResourceExhausted: queue full)
  // and enqueues. The callback runs on the engine
  // thread; it must not block.
  virtual absl::Status Submit(GenerationRequest request, GenerationCallback callback) = 0;
  // Cancels a queued or running request (client disconnected), every choice of it; frees its KV
  // blocks; each unfinished choice gets a final "abort" event. Unknown ids are ignored.
  virtual void Cancel(const std::string& request_id) = 0;
  virtual EngineStats Stats() const = 0;
  // False after a fatal step error (comm deadline, lost rank): every request then fails with it.
  virtual bool healthy() const = 0;
  virtual absl::Status fatal_error() const = 0;
  // Stops the loop: in-flight requests end with "abort"; workers are released. Idempotent; not
  // from a callback (those run on the engine thread, which Shutdown joins).
  virtual void Shutdown() = 0;
};

}  // namespace tandem::engine
