// What tool_choice "required" and a named function need: a grammar of the model's tool-call
// format (ChatPrompt::tool_call_syntax, read off its chat template) that admits only calls of
// the allowed tools with arguments valid against their JSON schemas. Constrained decoding with
// it (engine/grammar) makes even a random-weight model produce a call that tool_calls.h parses
// back.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/tokenizer/chat_prompt.h"
#include "openai/openai_protocol.h"

namespace tandem::openai {

// The grammar of the calls a request allows: one call of `request.tool_choice.function`, or
// (required) one or more calls of any tool (just one without parallel_tool_calls), in `syntax`.
// A tool's parameters that the schema compiler cannot express are a 400 naming
// tools[i].function.parameters.
std::optional<ApiError> BuildToolCallGrammar(tokenizer::ToolCallSyntax syntax, const ChatRequest& request,
                                             grammar::Grammar* out);

}  // namespace tandem::openai
