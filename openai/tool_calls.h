// Tool calls out of a model's generated text, for the formats of the Qwen family: a
// `<tool_call>...</tool_call>` block whose body is either Qwen3's JSON
//   {"name": "f", "arguments": {...}}
// or the Qwen3.5 / Qwen3-Coder XML style
//   <function=f>\n<parameter=p>\nVALUE\n</parameter>\n...</function>
// (a parameter value is taken as JSON when it parses, as a string otherwise or when the tool's
// schema types it a string: ToolCallOptions). The text outside the blocks is the message
// content; whitespace that only separates a call from its neighbours is dropped. A block that does not parse, or one still open at the end of the text, stays in
// the content as it was generated: malformed output never fails the request.
//
// Two entry points with the same result: ParseToolCalls over a whole text (non-streaming
// responses) and ToolCallStreamParser fed text deltas (streaming); chat_handler uses both.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::openai {

struct ToolCall {
  int index = 0;          // position among the calls of this message (streaming `index`)
  std::string id;         // "call_<random>"
  std::string name;
  std::string arguments;  // a JSON object, as text (OpenAI's function.arguments)
};

struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> tool_calls;

  // OpenAI reports "tool_calls" when the message carries any; otherwise the engine's reason.
  std::string FinishReason(std::string_view engine_reason) const;
};

// What the request's `tools` say about XML parameter values. A parameter whose JSON schema type
// is "string" keeps its text even when it would parse as JSON (a file's content that happens to
// be JSON, a number-like id), as vLLM's qwen3_coder parser does.
struct ToolCallOptions {
  std::set<std::pair<std::string, std::string>> string_params;  // (function, parameter)
};

// Reads the string-typed parameters out of an OpenAI `tools` array (JSON text). Anything it
// does not understand adds nothing: the values then fall back to "JSON when it parses".
ToolCallOptions ToolCallOptionsFromTools(std::string_view tools_json);

ParsedToolCalls ParseToolCalls(std::string_view text, const ToolCallOptions& options = {});

// OpenAI's JSON for one call: {"id", "type": "function", "function": {"name", "arguments"}},
// with "index" first when `streaming` (the shape of a chat.completion.chunk delta).
std::string ToolCallJson(const ToolCall& call, bool streaming);

// Incremental form of ParseToolCalls. Feed returns what may be sent now: content that can no
// longer be part of a `<tool_call>` tag or of whitespace before one, and every call whose
// closing tag has arrived. Finish flushes what was held back. The concatenated contents and the
// calls (ids aside) equal ParseToolCalls over the concatenated deltas, however they are split.
class ToolCallStreamParser {
 public:
  explicit ToolCallStreamParser(ToolCallOptions options = {}) : options_(std::move(options)) {}

  ParsedToolCalls Feed(std::string_view delta);
  ParsedToolCalls Finish();

 private:
  void Process(ParsedToolCalls& out);

  ToolCallOptions options_;
  bool inside_ = false;      // between `<tool_call>` and its closing tag
  bool after_call_ = false;  // a call just closed: leading whitespace is a separator
  std::string pending_;      // outside: text not yet sent; inside: the block's body so far
  std::string held_ws_;      // whitespace before the open block (content if it is malformed)
  size_t scanned_ = 0;       // inside: body bytes already searched for the closing tag
  int next_index_ = 0;
};

}  // namespace tandem::openai
