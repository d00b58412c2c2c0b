# Tool-call parser (openai/tool_calls): model output is outside input. Seeds are generated texts
# with calls in both formats, content around them, and malformed blocks.
tandem_add_fuzz(tool_call LIBS tandem_tool_calls nlohmann_json::nlohmann_json)
