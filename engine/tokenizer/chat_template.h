// The Qwen3 ChatML chat template (tokenizer_config.json "chat_template"), implemented in C++
// instead of interpreting Jinja. It renders the same text as the Jinja template for
// system/user/assistant/tool messages, assistant reasoning (<think>) and tool calls:
//   <|im_start|>ROLE\nCONTENT<|im_end|>\n ... [<|im_start|>assistant\n[<think>\n\n</think>\n\n]]
// The result is text; Tokenizer::Encode turns the special tokens in it into their ids.
// Serving renders the model's own template (chat_prompt.h); this is its fallback for model
// folders that have none.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tandem::tokenizer {

// One entry of an assistant message's "tool_calls", as the request sent it.
struct ChatToolCall {
  std::string name;
  // The JSON text the request sent (OpenAI sends arguments as a JSON-encoded string). The ChatML
  // writes it verbatim; model templates get it parsed (chat_prompt.h).
  std::string arguments;
  // "call_..."; "" when the request had none (then templates see no id). The `{}` initializers
  // here and below let callers keep writing the older fields positionally without a warning.
  std::string id{};
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"; other roles are skipped
  std::string content;
  // Assistant only: reasoning from an earlier turn. When absent, a "<think>...</think>" block
  // inside content is taken apart as the template does.
  std::optional<std::string> reasoning_content;
  std::vector<ChatToolCall> tool_calls;  // assistant only
  // OpenAI's optional participant name; "" = absent. Model templates see it as message.name.
  std::string name{};
  // Role "tool": the id of the call this message answers; "" = absent.
  std::string tool_call_id{};
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;  // end with "<|im_start|>assistant\n"
  bool enable_thinking = true;        // false: the generation prompt gets an empty think block
  // Tool definitions as JSON texts (OpenAI "tools" entries). They are rendered the way the
  // Jinja `tojson` filter of transformers renders them (", " and ": " separators, key order
  // kept, non-ASCII unescaped); a text that is not valid JSON is written verbatim.
  std::vector<std::string> tools;
  // The request's "documents" (retrieval-augmented templates such as Command-R's) as JSON text;
  // "" = none. Only model templates see them; the ChatML, like Qwen3's own template, has no use.
  std::string documents;
  // The request's chat_template_kwargs as a JSON object text ("" = none): more variables for the
  // model's template, set last as vLLM does (so {"enable_thinking": false} there wins). messages,
  // tools, documents, bos_token and eos_token have their own source and are refused here. The
  // ChatML reads only add_generation_prompt and enable_thinking, from the fields above.
  std::string template_kwargs;
};

std::string ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                              const ChatTemplateOptions& options);

}  // namespace tandem::tokenizer
