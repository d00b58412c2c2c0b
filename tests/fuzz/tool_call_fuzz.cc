// Fuzz target: generated text is outside input to the tool-call parser (a model can write
// anything). Whole-text parsing must not crash, every call's arguments must be a JSON object,
// and streaming the same text in uneven chunks (sizes taken from the input) must give the same
// content and calls.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "openai/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::openai;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // One string-typed parameter, so the schema path runs too (seed coder_xml.txt uses it).
  static const ToolCallOptions* const kOptions = new ToolCallOptions(ToolCallOptionsFromTools(
      R"([{"type": "function", "function": {"name": "search", "parameters": {"type": "object",
          "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}}}])"));
  const ParsedToolCalls whole = ParseToolCalls(text, *kOptions);
  for (const ToolCall& call : whole.tool_calls) {
    auto args = nlohmann::json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (!args.is_object() || call.name.empty()) std::abort();
    (void)ToolCallJson(call, /*streaming=*/true);
  }

  ToolCallStreamParser parser(*kOptions);
  ParsedToolCalls streamed;
  auto take = [&streamed](ParsedToolCalls part) {
    streamed.content += part.content;
    for (ToolCall& call : part.tool_calls) streamed.tool_calls.push_back(std::move(call));
  };
  size_t pos = 0;
  while (pos < text.size()) {
    // Chunk lengths 1..8 from the bytes themselves: deterministic, and varied across inputs.
    size_t len = 1 + static_cast<uint8_t>(text[pos]) % 8;
    take(parser.Feed(text.substr(pos, len)));
    pos += len;
  }
  take(parser.Finish());
  if (streamed.content != whole.content) std::abort();
  if (streamed.tool_calls.size() != whole.tool_calls.size()) std::abort();
  for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
    const ToolCall& a = whole.tool_calls[i];
    const ToolCall& b = streamed.tool_calls[i];
    if (a.index != b.index || a.name != b.name || a.arguments != b.arguments) std::abort();
  }
  return 0;
}
