// The OpenAI wire format as pure functions: parse and validate request bodies of
// /v1/completions and /v1/chat/completions into engine terms, and render responses, streaming
// (Server-Sent Events) chunks and errors. No I/O here, so every shape is unit-tested and the
// parsers are fuzzed (HTTP bodies are outside input).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/batching/llm_engine.h"
#include "engine/tokenizer/chat_template.h"

namespace tandem::openai {

// An error as OpenAI shapes it: {"error": {"message", "type", "param", "code"}} plus the HTTP
// status it is sent with. Empty `param` / `code` are written as null.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};

ApiError InvalidRequest(std::string message, std::string param = "", std::string code = "");
std::string ErrorJson(const ApiError& error);

// What both endpoints share after parsing.
struct CommonRequest {
  std::string model;
  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  std::optional<int32_t> max_tokens;       // absent: endpoint default (see ResolveMaxTokens)
  engine::SamplingParams params;           // max_tokens filled by ResolveMaxTokens
  bool return_token_ids = false;           // extension (as vLLM): token ids next to the text
};

struct CompletionRequest {
  CommonRequest common;
  // Exactly one of the two: a text prompt, or a prompt given as token ids.
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;
};

struct ChatRequest {
  CommonRequest common;
  std::vector<tokenizer::ChatMessage> messages;
  bool enable_thinking = true;             // chat_template_kwargs.enable_thinking
  std::vector<std::string> tools;          // raw JSON of each "tools" entry
};

// Parse a request body; on failure the error names the offending parameter.
std::optional<ApiError> ParseCompletionRequest(std::string_view body, CompletionRequest* out);
std::optional<ApiError> ParseChatRequest(std::string_view body, ChatRequest* out);

// Checks the prompt against the model and fills params.max_tokens: an explicit max_tokens must
// fit with the prompt in max_model_len; without one, `default_max_tokens` (completions: 16, as
// OpenAI) capped by what is left, or everything that is left when it is 0 (chat, as vLLM).
// Token ids must be in [0, vocab_size).
std::optional<ApiError> ValidatePrompt(const std::vector<int32_t>& prompt_ids, int64_t vocab_size,
                                       int32_t max_model_len, int32_t default_max_tokens,
                                       CommonRequest* request);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// Fields every response object carries.
struct ResponseHeader {
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

// Non-streaming responses (one choice, index 0).
std::string CompletionResponseJson(const ResponseHeader& header, const std::string& text,
                                   const std::string& finish_reason, const Usage& usage,
                                   const std::vector<int32_t>* token_ids);
std::string ChatResponseJson(const ResponseHeader& header, const std::string& content,
                             const std::string& finish_reason, const Usage& usage,
                             const std::vector<int32_t>* token_ids);

// Streaming chunks (the JSON of one SSE event). `finish_reason` empty = null. With
// include_usage, every chunk carries "usage": null and a last chunk carries the counts.
std::string CompletionChunkJson(const ResponseHeader& header, const std::string& text,
                                const std::string& finish_reason, bool include_usage,
                                const std::vector<int32_t>* token_ids);
// `role` non-empty only in the first chunk; `content` absent when `has_content` is false.
std::string ChatChunkJson(const ResponseHeader& header, const std::string& role, bool has_content,
                          const std::string& content, const std::string& finish_reason,
                          bool include_usage, const std::vector<int32_t>* token_ids);
// The usage chunk sent before [DONE]: "choices": [] and the counts.
std::string UsageChunkJson(const ResponseHeader& header, bool chat, const Usage& usage);

// "data: <json>\n\n" and the terminator "data: [DONE]\n\n".
std::string SseEvent(const std::string& json);
std::string SseDone();

// GET /v1/models.
std::string ModelsJson(const std::string& model, int64_t created, int32_t max_model_len);

}  // namespace tandem::openai
