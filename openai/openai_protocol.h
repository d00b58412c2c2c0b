// The OpenAI wire format's requests as pure functions: parse and validate request bodies of
// /v1/completions and /v1/chat/completions into engine terms, and the error shape. No I/O here,
// so every field is unit-tested and the parsers are fuzzed (HTTP bodies are outside input).
// Responses are rendered by response_json.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/batching/llm_engine.h"
#include "engine/tokenizer/chat_template.h"
#include "openai/response_format.h"

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
  int32_t n = 1;                           // choices per prompt
  // -1: no logprobs; else each token's logprob plus this many top alternatives (chat:
  // logprobs + top_logprobs; completions: the logprobs integer).
  int32_t logprobs = -1;
  // response_format: text, or a grammar the server compiles into params.grammar
  // (openai/response_format.h CompileResponseFormat).
  ResponseFormat response_format;
};

// At most this many choices (prompts x n) in one request: each is a sequence in the engine.
inline constexpr int kMaxChoices = 64;

struct CompletionRequest {
  CommonRequest common;
  // One per prompt of the batch (OpenAI's choices are prompt-major: prompt i, choice j has
  // index i * n + j). Each is a text or token ids, never both.
  struct Prompt {
    std::optional<std::string> text;
    std::vector<int32_t> ids;
  };
  std::vector<Prompt> prompts;
  bool echo = false;  // the prompt comes first in each choice's text
};

// tool_choice: the model decides (auto, the default with tools), no tool (none), at least one
// call (required), or a call of one named function.
struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function;  // kFunction: the name, one of the request's tools
};

struct ChatTool {
  std::string name;        // function.name
  std::string parameters;  // function.parameters as JSON text; "" when absent (no arguments)
};

struct ChatRequest {
  CommonRequest common;
  std::vector<tokenizer::ChatMessage> messages;
  bool enable_thinking = true;             // chat_template_kwargs.enable_thinking
  std::string template_kwargs;             // raw JSON of chat_template_kwargs (an object), "" if absent
  std::vector<std::string> tools;          // raw JSON of each "tools" entry, key order kept
  std::vector<ChatTool> tool_functions;    // the same tools, read
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;         // false: at most one call per message
  std::string documents;                   // raw JSON of "documents" (an array), empty if absent
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

}  // namespace tandem::openai
