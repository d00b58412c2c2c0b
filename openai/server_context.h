// What the OpenAI server's routes share (openai_server.cc, chat_handler.cc,
// completion_handler.cc): the engine, tokenizer, metrics and options, the drain flag and the
// count of requests in flight, and the checks every generation route makes (API key, model name,
// readiness, the prompt within the context) with their errors in OpenAI's shape.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/batching/llm_engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "http/server.h"
#include "engine/grammar/grammar_cache.h"
#include "openai/openai_protocol.h"
#include "openai/openai_server.h"
#include "openai/response_json.h"
#include "openai/serve_metrics.h"

namespace tandem::openai {

int64_t UnixNow();
// `n` random hex digits, for response ids.
std::string RandomHex(int n);
ApiError MakeError(int status, std::string type, std::string message, std::string code = "");
// An engine refusal (Submit) as the client should see it: 400, 429 (queue full) or 503.
ApiError SubmitError(const absl::Status& st);

struct ServerContext {
  ServerContext(engine::LLMEngine* engine, const tokenizer::Tokenizer* tokenizer, ServeMetrics* metrics,
                OpenAIServerOptions options);

  engine::LLMEngine* const engine;
  const tokenizer::Tokenizer* const tokenizer;  // null: token-id prompts only
  // Compiled response_format grammars for the tokenizer's vocabulary (null without a tokenizer).
  const std::unique_ptr<grammar::GrammarCache> grammars;
  ServeMetrics* const metrics;
  const OpenAIServerOptions options;            // chat_prompt always set
  const int64_t created = UnixNow();
  std::atomic<bool> draining{false};
  std::atomic<int> active{0};

  // The error response (Retry-After on 429 / 503, WWW-Authenticate on 401), counted as rejected.
  http::Response Error(const ApiError& e) const;
  void Reply(http::Exchange& ex, const ApiError& e) const { ex.Respond(Error(e)); }

  // nullopt when the request may use /v1/*.
  std::optional<ApiError> Authorize(const http::Request& req) const;
  bool Ready() const;
  // The model named in a request must be the served one ("" = it); the engine must be ready.
  std::optional<ApiError> CheckModelAndReady(const std::string& model) const;
  // The text's tokens, or nullopt once it is known to exceed max_model_len: an over-long prompt
  // costs about max_model_len tokens of work, not all of it (a 4 MiB body is ~1M tokens).
  std::optional<std::vector<int32_t>> EncodeWithinContext(std::string_view text) const;
  ApiError PromptTooLong(const std::string& param) const;
  // The engine's logprobs with each token as its bytes ("token_id:N" without a tokenizer, as
  // vLLM writes ids it cannot show).
  std::vector<LogprobEntry> LogprobEntries(const std::vector<engine::TokenLogprob>& logprobs) const;
  std::string TokenText(int32_t id) const;
};

}  // namespace tandem::openai
