// The OpenAI wire format's responses as pure functions: chat.completion / text_completion
// objects with their choices, streaming (Server-Sent Events) chunks, logprobs in each
// endpoint's shape, tool calls, usage and /v1/models. No I/O here, so every shape is unit-tested.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "openai/tool_calls.h"

namespace tandem::openai {

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

// One token's log-probability as a response shows it: the token's bytes (the text may be part
// of a UTF-8 character) and its most likely alternatives. No logprob: the first prompt token of
// an echoed completion (nothing precedes it).
struct LogprobEntry {
  std::string token;
  std::optional<float> logprob;
  std::vector<std::pair<std::string, float>> top;  // most likely first
};

// Where the text after `entries` starts, counting from `offset`: text_offset counts characters
// (code points) of the tokens' text, as OpenAI does.
int64_t TextOffsetAfter(const std::vector<LogprobEntry>& entries, int64_t offset);

// A completion choice, whole or (streaming) the piece of it this chunk carries.
struct CompletionChoice {
  int index = 0;
  std::string text;
  std::string finish_reason;                     // "" = null (streaming: not finished yet)
  const std::vector<LogprobEntry>* logprobs = nullptr;  // null: "logprobs": null
  int64_t text_offset = 0;                       // where `text` starts in the whole choice
  const std::vector<int32_t>* token_ids = nullptr;      // extension: return_token_ids
};

// A chat choice: the message (non-streaming) or the delta (streaming).
struct ChatChoice {
  int index = 0;
  std::string role;                      // delta: only in a choice's first chunk
  std::optional<std::string> content;    // null (message) / absent (delta) when nullopt
  std::vector<ToolCall> tool_calls;      // message: whole calls (absent when none)
  std::string tool_call_deltas;          // delta: the JSON array of tool-call deltas, "" = none
  std::string finish_reason;
  const std::vector<LogprobEntry>* logprobs = nullptr;
  const std::vector<int32_t>* token_ids = nullptr;
};

// Non-streaming responses.
std::string CompletionResponseJson(const ResponseHeader& header, const std::vector<CompletionChoice>& choices,
                                   const Usage& usage);
std::string ChatResponseJson(const ResponseHeader& header, const std::vector<ChatChoice>& choices,
                             const Usage& usage);

// Streaming chunks (the JSON of one SSE event), one choice each. With include_usage every chunk
// carries "usage": null and a last chunk (UsageChunkJson) the counts.
std::string CompletionChunkJson(const ResponseHeader& header, const CompletionChoice& choice, bool include_usage);
std::string ChatChunkJson(const ResponseHeader& header, const ChatChoice& choice, bool include_usage);
std::string UsageChunkJson(const ResponseHeader& header, bool chat, const Usage& usage);

// The deltas that stream one finished tool call as OpenAI and vLLM do: first its index, id, type
// and name (arguments ""), then its arguments; a JSON array for ChatChoice::tool_call_deltas.
std::vector<std::string> ToolCallDeltas(const ToolCall& call);

// "data: <json>\n\n" and the terminator "data: [DONE]\n\n".
std::string SseEvent(const std::string& json);
std::string SseDone();

// GET /v1/models and GET /v1/models/{id}.
std::string ModelJson(const std::string& model, int64_t created, int32_t max_model_len);
std::string ModelsJson(const std::string& model, int64_t created, int32_t max_model_len);

}  // namespace tandem::openai
