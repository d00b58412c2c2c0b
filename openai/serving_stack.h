// The head's serving stack over a loaded model's StepDriver: the LLMEngine that batches requests
// and the OpenAI server in front of it, with the defaults they share. `tandem-infer serve` (infer/serve_command.cc) and the agent's
// rank 0 (agentd/engine_head.cc) both build it here, so the two cannot drift apart.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/batching/llm_engine.h"
#include "engine/step_driver.h"
#include "engine/tokenizer/chat_prompt.h"
#include "engine/tokenizer/tokenizer.h"
#include "openai/openai_server.h"
#include "openai/serve_metrics.h"

namespace tandem::openai {

struct ServingStackOptions {
  // The engine's; max_model_len 0 = min(4096, the model's max_position_embeddings). Its on_step
  // is set here (step times into the metrics).
  engine::EngineOptions engine;
  // The server's: listen address, API key, limits, readiness gate. Its max_model_len and
  // vocab_size are the engine's and the model's, set here.
  OpenAIServerOptions server;
  // Requests in flight at the HTTP layer; 0 = max_num_seqs + max_waiting + 8, so that the
  // engine's own admission (429 with its reason) decides before the event loop's cap does.
  int max_in_flight = 0;
  // The model folder whose chat template (tokenizer_config.json / chat_template.jinja) renders
  // chat prompts; parsed in Start, which fails naming the construct when the interpreter cannot
  // handle it. A folder without a template, or "": the built-in Qwen3 ChatML. Unused without
  // a tokenizer.
  std::string chat_template_dir;
};

class ServingStack {
 public:
  // Builds the stack over `driver` (the model's, and its group's comm) and starts the server: it
  // accepts connections when this returns. `tokenizer` may be null (token-id prompts only).
  // Nothing is owned; all must outlive the stack. The driver stays the caller's: releasing the
  // group's other ranks (StepDriver::Stop) is its call, after Stop() here, or after aborting
  // the comm when the stack could not start.
  static absl::StatusOr<std::unique_ptr<ServingStack>> Start(engine::StepDriver* driver,
                                                             const tokenizer::Tokenizer* tokenizer,
                                                             ServeMetrics* metrics, ServingStackOptions options);
  ~ServingStack();  // Stop() when it was not called
  ServingStack(const ServingStack&) = delete;
  ServingStack& operator=(const ServingStack&) = delete;

  engine::LLMEngine& engine() { return *engine_; }
  const engine::LLMEngine& engine() const { return *engine_; }
  OpenAIServer& server() { return *server_; }
  // What the server renders chat prompts with (the agent's probe uses it too).
  const tokenizer::ChatPrompt& chat_prompt() const { return *chat_prompt_; }
  int32_t max_model_len() const { return max_model_len_; }

  // Shutdown, in the order that frees what a later stack needs first. StopListening: the port
  // is free at once (never blocks). Drain: new requests get 503; waits up to `deadline` for the
  // ones in flight, returns how many are left. Stop: the engine aborts what is left, then the
  // server's threads end. engine() and server() stay readable after Stop (the agent's status and
  // monitor may still look); the destructor frees them, except an engine that a server handler
  // which did not end may still call: that one is left allocated, not freed under it.
  void StopListening() { server_->StopListening(); }
  int Drain(std::chrono::milliseconds deadline) { return server_->Drain(deadline); }
  void Stop();

 private:
  ServingStack() = default;

  std::unique_ptr<engine::LLMEngine> engine_;
  std::unique_ptr<OpenAIServer> server_;
  std::shared_ptr<const tokenizer::ChatPrompt> chat_prompt_;
  int32_t max_model_len_ = 0;
  bool stopped_ = false;
  bool handlers_left_ = false;  // the server's Stop did not end every handler
};

}  // namespace tandem::openai
