// Fuzz target: OpenAI request bodies (/v1/completions and /v1/chat/completions), which come from
// any HTTP client. Parsing must never crash or throw; an accepted request satisfies what the
// engine relies on (and a forced tool choice's grammar builds or is refused), and an error always
// names a status and renders as JSON.
#include <cstdint>
#include <string>

#include "openai/openai_protocol.h"
#include "openai/tool_call_grammar.h"
#include "nlohmann/json.hpp"

namespace {

void CheckError(const tandem::openai::ApiError& e) {
  if (e.http_status != 400 || e.message.empty()) __builtin_trap();
  if (!nlohmann::json::accept(tandem::openai::ErrorJson(e))) __builtin_trap();
}

void CheckAccepted(tandem::openai::CommonRequest& c, const std::vector<int32_t>& ids) {
  const auto& p = c.params;
  if (!(p.temperature >= 0.0f && p.temperature <= 2.0f) || !(p.top_p > 0.0f && p.top_p <= 1.0f) || p.top_k < 0) {
    __builtin_trap();
  }
  if (c.max_tokens && *c.max_tokens < 1) __builtin_trap();
  if (c.n < 1 || c.n > tandem::openai::kMaxChoices || c.logprobs < -1 || c.logprobs > 20) __builtin_trap();
  // The sampling extensions in the ranges LLMEngine::Submit accepts.
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f) || !(p.repetition_penalty > 0.0f && p.repetition_penalty <= 10.0f) ||
      !(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f) ||
      !(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f) || p.min_tokens < 0) {
    __builtin_trap();
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || !(bias >= -100.0f && bias <= 100.0f)) __builtin_trap();
  }
  // Validation against a small model: either an error or a max_tokens that fits.
  auto e = tandem::openai::ValidatePrompt(ids, 4096, 512, 16, &c);
  if (e) {
    CheckError(*e);
  } else if (c.params.max_tokens < 1 || static_cast<int64_t>(ids.size()) + c.params.max_tokens > 512 ||
             c.params.min_tokens > c.params.max_tokens) {
    __builtin_trap();
  } else {
    for (const auto& [id, bias] : c.params.logit_bias) {
      if (id >= 4096) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  tandem::openai::CompletionRequest completion;
  if (auto e = tandem::openai::ParseCompletionRequest(body, &completion)) {
    CheckError(*e);
  } else {
    const auto& prompts = completion.prompts;
    if (prompts.empty() || prompts.size() * static_cast<size_t>(completion.common.n) > tandem::openai::kMaxChoices) {
      __builtin_trap();
    }
    for (const auto& p : prompts) {
      if (p.text.has_value() == !p.ids.empty()) __builtin_trap();
      // A text prompt stands in as one token per byte (capped) for the length checks.
      std::vector<int32_t> ids = p.ids;
      if (p.text) ids.assign(std::min<size_t>(p.text->size(), 600), 1);
      tandem::openai::CommonRequest common = completion.common;  // resolved per prompt, as the server does
      CheckAccepted(common, ids);
    }
  }
  tandem::openai::ChatRequest chat;
  if (auto e = tandem::openai::ParseChatRequest(body, &chat)) {
    CheckError(*e);
  } else {
    if (chat.messages.empty()) __builtin_trap();
    CheckAccepted(chat.common, std::vector<int32_t>(chat.messages.size(), 1));
    // The tools' schemas are outside input too: a forced call's grammar, in either format, is
    // built or refused with a 400, never a crash.
    using tandem::openai::ToolChoice;
    if (chat.tool_choice.mode == ToolChoice::Mode::kRequired || chat.tool_choice.mode == ToolChoice::Mode::kFunction) {
      if (chat.tool_functions.empty()) __builtin_trap();
      for (auto syntax : {tandem::tokenizer::ToolCallSyntax::kJson, tandem::tokenizer::ToolCallSyntax::kXml}) {
        tandem::grammar::Grammar g;
        if (auto e = tandem::openai::BuildToolCallGrammar(syntax, chat, &g)) CheckError(*e);
      }
    }
  }
  return 0;
}
