// Fuzz target: a chat template is outside input (it ships with the model). Parsing must succeed
// or return an error; a parsed template must render a fixed conversation or return an error,
// within the render limits (a longer output would mean a limit is not enforced).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tandem::jinja::Template;
  static const nlohmann::ordered_json* const kContext = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "bos_token": "<s>", "add_generation_prompt": true, "enable_thinking": false,
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Zürich? 😀"},
      {"role": "assistant", "content": "<think>x</think>ok", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}]},
      {"role": "tool", "content": "{\"t\": 21.5}"},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}, {"type": "image"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
  })"));
  tandem::jinja::TemplateOptions options;
  options.limits.max_output_bytes = 1 << 16;
  options.limits.max_steps = 200000;
  options.limits.max_items = 10000;
  auto tmpl = Template::Parse(std::string_view(reinterpret_cast<const char*>(data), size), options);
  if (!tmpl.ok()) return 0;
  auto out = tmpl->Render(*kContext);
  if (out.ok() && out->size() > options.limits.max_output_bytes) std::abort();
  return 0;
}
