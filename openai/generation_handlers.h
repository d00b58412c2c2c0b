// The two generation routes of the OpenAI server, each in its own file: POST /v1/chat/completions
// (chat_handler.cc: the model's chat template, tool calls, logprobs, n) and POST /v1/completions
// (completion_handler.cc: prompts and batches of them, echo, logprobs, n). Both run on a worker
// thread and answer, streaming (Server-Sent Events) or not, through `ex`.
#pragma once

#include "http/server.h"
#include "openai/server_context.h"

namespace tandem::openai {

void HandleChatCompletions(ServerContext& ctx, http::Exchange& ex);
void HandleCompletions(ServerContext& ctx, http::Exchange& ex);

}  // namespace tandem::openai
