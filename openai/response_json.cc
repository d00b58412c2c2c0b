#include "openai/response_json.h"

#include <utility>

#include "nlohmann/json.hpp"

namespace tandem::openai {
namespace {

using Json = nlohmann::ordered_json;

// Generated text and token bytes need not be valid UTF-8: replace bad bytes, never throw.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// JSON has no -infinity; OpenAI writes -9999.0 for a token the model gives no chance.
double FiniteLogprob(float lp) { return lp > -9999.0f ? static_cast<double>(lp) : -9999.0; }

Json Envelope(const ResponseHeader& h, const char* object) {
  Json j;
  j["id"] = h.id;
  j["object"] = object;
  j["created"] = h.created;
  j["model"] = h.model;
  return j;
}

Json UsageJson(const Usage& u) {
  Json j;
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  return j;
}

Json FinishReasonJson(const std::string& reason) { return reason.empty() ? Json(nullptr) : Json(reason); }

Json BytesJson(const std::string& s) {
  Json bytes = Json::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// Characters (code points) in UTF-8 bytes, as OpenAI's text_offset counts them.
int64_t CountChars(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}.
Json ChatLogprobsJson(const std::vector<LogprobEntry>& entries) {
  Json content = Json::array();
  for (const LogprobEntry& e : entries) {
    Json t;
    t["token"] = e.token;
    t["logprob"] = FiniteLogprob(e.logprob.value_or(0.0f));
    t["bytes"] = BytesJson(e.token);
    Json top = Json::array();
    for (const auto& [token, lp] : e.top) {
      Json alt;
      alt["token"] = token;
      alt["logprob"] = FiniteLogprob(lp);
      alt["bytes"] = BytesJson(token);
      top.push_back(std::move(alt));
    }
    t["top_logprobs"] = std::move(top);
    content.push_back(std::move(t));
  }
  Json j;
  j["content"] = std::move(content);
  j["refusal"] = nullptr;
  return j;
}

// Completions: parallel arrays tokens / token_logprobs / top_logprobs ({token: logprob}) /
// text_offset, the offsets counted from `offset` (where this piece starts in the choice).
Json CompletionLogprobsJson(const std::vector<LogprobEntry>& entries, int64_t offset) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(),
       text_offset = Json::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.token);
    text_offset.push_back(offset);
    offset += CountChars(e.token);
    if (!e.logprob) {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    token_logprobs.push_back(FiniteLogprob(*e.logprob));
    // The chosen token is always in its position's dict (as vLLM writes it), then the
    // alternatives.
    Json top = Json::object();
    top[e.token] = FiniteLogprob(*e.logprob);
    for (const auto& [token, lp] : e.top) {
      if (!top.contains(token)) top[token] = FiniteLogprob(lp);
    }
    top_logprobs.push_back(std::move(top));
  }
  Json j;
  j["tokens"] = std::move(tokens);
  j["token_logprobs"] = std::move(token_logprobs);
  j["top_logprobs"] = std::move(top_logprobs);
  j["text_offset"] = std::move(text_offset);
  return j;
}

// The payload (`text`, `message` or `delta`) sits between `index` and `logprobs`, as in OpenAI's
// own responses.
Json CompletionChoiceJson(const CompletionChoice& c) {
  Json j;
  j["index"] = c.index;
  j["text"] = c.text;
  j["logprobs"] = c.logprobs ? CompletionLogprobsJson(*c.logprobs, c.text_offset) : Json(nullptr);
  j["finish_reason"] = FinishReasonJson(c.finish_reason);
  if (c.token_ids) j["token_ids"] = *c.token_ids;
  return j;
}

Json ChatChoiceJson(const ChatChoice& c, bool delta) {
  Json payload = Json::object();
  if (delta) {
    if (!c.role.empty()) payload["role"] = c.role;
    if (c.content) payload["content"] = *c.content;
    if (!c.tool_call_deltas.empty()) payload["tool_calls"] = Json::parse(c.tool_call_deltas);
  } else {
    payload["role"] = "assistant";
    payload["content"] = c.content ? Json(*c.content) : Json(nullptr);
    if (!c.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ToolCall& call : c.tool_calls) calls.push_back(Json::parse(ToolCallJson(call, /*streaming=*/false)));
      payload["tool_calls"] = std::move(calls);
    }
  }
  Json j;
  j["index"] = c.index;
  j[delta ? "delta" : "message"] = std::move(payload);
  j["logprobs"] = c.logprobs ? ChatLogprobsJson(*c.logprobs) : Json(nullptr);
  j["finish_reason"] = FinishReasonJson(c.finish_reason);
  if (c.token_ids) j["token_ids"] = *c.token_ids;
  return j;
}

}  // namespace

int64_t TextOffsetAfter(const std::vector<LogprobEntry>& entries, int64_t offset) {
  for (const LogprobEntry& e : entries) offset += CountChars(e.token);
  return offset;
}

std::string CompletionResponseJson(const ResponseHeader& header, const std::vector<CompletionChoice>& choices,
                                   const Usage& usage) {
  Json j = Envelope(header, "text_completion");
  j["choices"] = Json::array();
  for (const CompletionChoice& c : choices) j["choices"].push_back(CompletionChoiceJson(c));
  j["usage"] = UsageJson(usage);
  return Dump(j);
}

std::string ChatResponseJson(const ResponseHeader& header, const std::vector<ChatChoice>& choices,
                             const Usage& usage) {
  Json j = Envelope(header, "chat.completion");
  j["choices"] = Json::array();
  for (const ChatChoice& c : choices) j["choices"].push_back(ChatChoiceJson(c, /*delta=*/false));
  j["usage"] = UsageJson(usage);
  return Dump(j);
}

std::string CompletionChunkJson(const ResponseHeader& header, const CompletionChoice& choice, bool include_usage) {
  Json j = Envelope(header, "text_completion");
  j["choices"] = Json::array({CompletionChoiceJson(choice)});
  if (include_usage) j["usage"] = nullptr;
  return Dump(j);
}

std::string ChatChunkJson(const ResponseHeader& header, const ChatChoice& choice, bool include_usage) {
  Json j = Envelope(header, "chat.completion.chunk");
  j["choices"] = Json::array({ChatChoiceJson(choice, /*delta=*/true)});
  if (include_usage) j["usage"] = nullptr;
  return Dump(j);
}

std::string UsageChunkJson(const ResponseHeader& header, bool chat, const Usage& usage) {
  Json j = Envelope(header, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = Json::array();
  j["usage"] = UsageJson(usage);
  return Dump(j);
}

std::vector<std::string> ToolCallDeltas(const ToolCall& call) {
  Json head;
  head["index"] = call.index;
  head["id"] = call.id;
  head["type"] = "function";
  head["function"] = {{"name", call.name}, {"arguments", ""}};
  Json args;
  args["index"] = call.index;
  args["function"] = {{"arguments", call.arguments}};
  return {Dump(Json::array({head})), Dump(Json::array({args}))};
}

std::string SseEvent(const std::string& json) { return "data: " + json + "\n\n"; }
std::string SseDone() { return "data: [DONE]\n\n"; }

std::string ModelJson(const std::string& model, int64_t created, int32_t max_model_len) {
  Json m;
  m["id"] = model;
  m["object"] = "model";
  m["created"] = created;
  m["owned_by"] = "tandem";
  m["max_model_len"] = max_model_len;
  return Dump(m);
}

std::string ModelsJson(const std::string& model, int64_t created, int32_t max_model_len) {
  Json j;
  j["object"] = "list";
  j["data"] = Json::array({Json::parse(ModelJson(model, created, max_model_len))});
  return Dump(j);
}

}  // namespace tandem::openai
