// The prompt text of a chat: the model's own chat template (tokenizer_config.json
// "chat_template" or chat_template.jinja, found as transformers finds it) rendered by our Jinja
// interpreter, or, for a model folder without any template, the built-in Qwen3 ChatML
// (ApplyChatTemplate). Loaded and parsed once when a server starts, so that a template we cannot
// interpret stops the start with the construct named instead of failing every request.
//
// The render context follows vLLM: messages as OpenAI sends them (role, content, tool_calls with
// id / type / function, reasoning_content, tool_call_id, name; absent fields left out) with
// content always a string ("" for a null content: Qwen3's template fails on a null content next
// to tool calls), tool-call arguments parsed from their JSON text (what transformers' templates
// expect; "" becomes {}, a text that is not JSON stays a string), `tools` and `documents` only
// when there are some, both with the request's key order, add_generation_prompt,
// enable_thinking, the request's chat_template_kwargs (set last), bos_token and eos_token.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/jinja/model_template.h"

namespace tandem::tokenizer {

// How a template writes an assistant's tool calls, i.e. what the model was trained to generate:
// Qwen3's `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, or the XML body of
// Qwen3.5 and Qwen3-Coder, `<tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>...`
// (vLLM's hermes and qwen3_coder tool parsers).
enum class ToolCallSyntax { kJson, kXml };

class ChatPrompt {
 public:
  // The template of `model_dir`; none there: the ChatML fallback (logged). A template that does
  // not parse: InvalidArgument naming the file, the construct and its line.
  static absl::StatusOr<std::shared_ptr<const ChatPrompt>> Load(const std::string& model_dir);
  // The built-in ChatML, for callers without a model folder.
  static std::shared_ptr<const ChatPrompt> ChatML();

  // Fails when the template raises (raise_exception, e.g. roles that do not alternate) or
  // exceeds the interpreter's limits; the message is the template's.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     const ChatTemplateOptions& options) const;

  // The file the template came from; "" for the ChatML fallback.
  std::string source() const { return model_ ? model_->source : ""; }

  // kXml when the template writes `<function=` (the XML format), else kJson (Qwen3's template
  // and the ChatML fallback). Decided once at load.
  ToolCallSyntax tool_call_syntax() const { return tool_call_syntax_; }

 private:
  explicit ChatPrompt(std::optional<jinja::ModelChatTemplate> model);
  std::optional<jinja::ModelChatTemplate> model_;
  ToolCallSyntax tool_call_syntax_ = ToolCallSyntax::kJson;
};

}  // namespace tandem::tokenizer
