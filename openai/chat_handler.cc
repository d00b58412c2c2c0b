// POST /v1/chat/completions: the conversation rendered with the model's chat template, n choices
// of it generated, and each choice's text read for tool calls (unless tool_choice is "none" or
// there are no tools), whole or as Server-Sent Events.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "openai/generation_handlers.h"
#include "openai/generation_run.h"
#include "openai/response_json.h"
#include "openai/tool_call_grammar.h"
#include "openai/tool_calls.h"

namespace tandem::openai {
namespace {

// One choice's state while it is generated.
struct ChoiceState {
  std::string text;                        // non-streaming: everything
  std::vector<int32_t> ids;                // non-streaming: everything; streaming: not yet sent
  std::vector<LogprobEntry> logprobs;      // likewise
  std::optional<ToolCallStreamParser> parser;  // streaming with tool parsing
  int calls_sent = 0;
};

// How the chat's output is read back, from the request.
struct OutputOptions {
  bool parse_tools = false;
  ToolCallOptions tool_options;
  bool parallel_tool_calls = true;
  bool logprobs = false;
  bool token_ids = false;
  bool include_usage = false;
};

// Streams the choices of one chat request as chunks.
class ChatStream {
 public:
  ChatStream(ServerContext& ctx, http::Exchange& ex, ResponseHeader header, OutputOptions out, int choices)
      : ctx_(ctx), ex_(ex), header_(std::move(header)), out_(std::move(out)), choices_(choices) {
    for (ChoiceState& c : choices_) {
      if (out_.parse_tools) c.parser.emplace(out_.tool_options);
    }
  }

  // The first chunk of every choice: the role and an empty content, in index order.
  bool Begin() {
    for (size_t i = 0; i < choices_.size(); ++i) {
      ChatChoice c;
      c.index = static_cast<int>(i);
      c.role = "assistant";
      c.content = "";
      if (!Send(c)) return false;
    }
    return true;
  }

  bool OnEvent(int index, const engine::GenerationEvent& ev) {
    ChoiceState& s = choices_[index];
    if (out_.logprobs) Append(s.logprobs, ctx_.LogprobEntries(ev.logprobs));
    if (out_.token_ids) Append(s.ids, ev.token_ids);
    const bool final = ev.choice_finished || ev.finished;
    if (final && (ev.finish_reason == "error" || ev.finish_reason == "abort")) return true;  // sent as an error
    ParsedToolCalls parsed;
    if (s.parser) {
      parsed = s.parser->Feed(ev.text_delta);
      if (final) {
        ParsedToolCalls rest = s.parser->Finish();
        parsed.content += rest.content;
        Append(parsed.tool_calls, std::move(rest.tool_calls));
      }
    } else {
      parsed.content = ev.text_delta;
    }
    // Without tool parsing every event is a chunk (logprobs and ids stream as they come); with
    // it, text the parser holds back waits, and its logprobs with it.
    if (!parsed.content.empty() || (!s.parser && (!s.logprobs.empty() || !s.ids.empty()))) {
      ChatChoice c = Piece(index, s);
      c.content = std::move(parsed.content);
      if (!Send(c)) return false;
    }
    for (const ToolCall& call : parsed.tool_calls) {
      if (!out_.parallel_tool_calls && s.calls_sent > 0) break;  // one call per message
      ToolCall numbered = call;
      numbered.index = s.calls_sent++;
      for (std::string& delta : ToolCallDeltas(numbered)) {
        ChatChoice c = Piece(index, s);
        c.tool_call_deltas = std::move(delta);
        if (!Send(c)) return false;
      }
    }
    if (!final) return true;
    ChatChoice c = Piece(index, s);
    c.finish_reason = s.calls_sent > 0 ? "tool_calls" : ev.finish_reason;
    return Send(c);
  }

 private:
  template <typename T>
  static void Append(std::vector<T>& to, std::vector<T> from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
  // A chunk of choice `index` carrying what is pending of its logprobs and ids.
  ChatChoice Piece(int index, ChoiceState& s) {
    ChatChoice c;
    c.index = index;
    pending_logprobs_ = std::move(s.logprobs);
    pending_ids_ = std::move(s.ids);
    s.logprobs.clear();
    s.ids.clear();
    if (out_.logprobs) c.logprobs = &pending_logprobs_;
    if (out_.token_ids) c.token_ids = &pending_ids_;
    return c;
  }
  bool Send(const ChatChoice& c) { return ex_.Write(SseEvent(ChatChunkJson(header_, c, out_.include_usage))); }

  ServerContext& ctx_;
  http::Exchange& ex_;
  const ResponseHeader header_;
  const OutputOptions out_;
  std::vector<ChoiceState> choices_;
  std::vector<LogprobEntry> pending_logprobs_;
  std::vector<int32_t> pending_ids_;
};

// The whole response of a non-streaming chat request.
std::string ChatResponse(const ResponseHeader& header, const OutputOptions& out, const GenerationRun& run,
                         std::vector<ChoiceState>& choices) {
  std::vector<ChatChoice> rendered(choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    ChatChoice& c = rendered[i];
    ChoiceState& s = choices[i];
    c.index = static_cast<int>(i);
    c.finish_reason = run.finish_reason(c.index);
    if (out.parse_tools) {
      ParsedToolCalls parsed = ParseToolCalls(s.text, out.tool_options);
      if (!out.parallel_tool_calls && parsed.tool_calls.size() > 1) parsed.tool_calls.resize(1);
      c.finish_reason = parsed.FinishReason(c.finish_reason);
      // A message that only calls tools has null content, as OpenAI sends it.
      if (!parsed.content.empty() || parsed.tool_calls.empty()) c.content = std::move(parsed.content);
      c.tool_calls = std::move(parsed.tool_calls);
    } else {
      c.content = std::move(s.text);
    }
    if (out.logprobs) c.logprobs = &s.logprobs;
    if (out.token_ids) c.token_ids = &s.ids;
  }
  return ChatResponseJson(header, rendered, run.usage());
}

// The `tools` array as one JSON text (what ToolCallOptionsFromTools reads).
std::string ToolsArray(const std::vector<std::string>& tools) {
  std::string s = "[";
  for (size_t i = 0; i < tools.size(); ++i) s += (i ? "," : "") + tools[i];
  return s + "]";
}

// tool_choice "required" or a named function: the output is constrained to calls in the model's
// own format (tool_call_grammar.h), so that a call comes even when the model would not write one.
std::optional<ApiError> ForceToolCalls(ServerContext& ctx, ChatRequest& r) {
  const ToolChoice& choice = r.tool_choice;
  if (choice.mode != ToolChoice::Mode::kRequired && choice.mode != ToolChoice::Mode::kFunction) return std::nullopt;
  if (r.common.params.grammar) {
    return InvalidRequest("tool_choice 'required' or a named function cannot be combined with a JSON response_format",
                          "tool_choice");
  }
  const tokenizer::ToolCallSyntax syntax = ctx.options.chat_prompt->tool_call_syntax();
  grammar::Grammar g;
  if (auto e = BuildToolCallGrammar(syntax, r, &g)) return e;
  // Requests with the same tools and choice share one compiled grammar (and its mask cache).
  const std::string key = std::string("tool_calls:") + (syntax == tokenizer::ToolCallSyntax::kXml ? "xml:" : "json:") +
                          (choice.mode == ToolChoice::Mode::kFunction ? "function=" + choice.function : "required") +
                          (r.parallel_tool_calls ? ":parallel:" : ":one:") + ToolsArray(r.tools);
  absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compiled = ctx.grammars->Get(key, g);
  if (!compiled.ok()) return InvalidRequest("the tools' grammar: " + std::string(compiled.status().message()), "tools");
  r.common.params.grammar = *compiled;
  return std::nullopt;
}

}  // namespace

void HandleChatCompletions(ServerContext& ctx, http::Exchange& ex) {
  if (auto e = ctx.Authorize(ex.request())) return ctx.Reply(ex, *e);
  ChatRequest r;
  if (auto e = ParseChatRequest(ex.request().body, &r)) return ctx.Reply(ex, *e);
  if (auto e = ctx.CheckModelAndReady(r.common.model)) return ctx.Reply(ex, *e);
  if (ctx.tokenizer == nullptr) {
    return ctx.Reply(ex, InvalidRequest("this model folder has no tokenizer: chat needs one; use "
                                        "/v1/completions with token ids",
                                        "messages"));
  }
  tokenizer::ChatTemplateOptions topts;
  topts.add_generation_prompt = true;
  topts.enable_thinking = r.enable_thinking;
  // tool_choice "none" still shows the tools to the model (as vLLM does by default), so that the
  // conversation's earlier calls make sense; its output is then not read for calls.
  topts.tools = r.tools;
  topts.documents = r.documents;
  topts.template_kwargs = r.template_kwargs;
  absl::StatusOr<std::string> prompt = ctx.options.chat_prompt->Render(r.messages, topts);
  // The template refused the conversation (raise_exception, e.g. roles out of order).
  if (!prompt.ok()) return ctx.Reply(ex, InvalidRequest(std::string(prompt.status().message()), "messages"));
  std::optional<std::vector<int32_t>> ids = ctx.EncodeWithinContext(*prompt);
  if (!ids) return ctx.Reply(ex, ctx.PromptTooLong("messages"));
  // Every id that ends a turn for this model (tokenizer_config's eos_token, the generation
  // config's eos ids); a folder that names none: the ChatML's <|im_end|>.
  std::vector<int32_t>& stop_ids = r.common.params.stop_token_ids;
  const std::vector<int32_t>& eos_ids = ctx.tokenizer->eos_token_ids();
  stop_ids.insert(stop_ids.end(), eos_ids.begin(), eos_ids.end());
  if (eos_ids.empty()) {
    if (auto im_end = ctx.tokenizer->TokenId("<|im_end|>")) stop_ids.push_back(*im_end);
  }
  if (auto e = ValidatePrompt(*ids, ctx.options.vocab_size, ctx.options.max_model_len, 0, &r.common)) {
    return ctx.Reply(ex, *e);
  }
  r.common.params.logprobs = r.common.logprobs;
  if (auto e = ApplyResponseFormat(r.common.response_format, ctx.grammars.get(), &r.common.params)) {
    return ctx.Reply(ex, *e);
  }
  if (auto e = ForceToolCalls(ctx, r)) return ctx.Reply(ex, *e);

  OutputOptions out;
  out.parse_tools = !r.tools.empty() && r.tool_choice.mode != ToolChoice::Mode::kNone;
  if (out.parse_tools) out.tool_options = ToolCallOptionsFromTools(ToolsArray(r.tools));
  out.parallel_tool_calls = r.parallel_tool_calls;
  out.logprobs = r.common.logprobs >= 0;
  out.token_ids = r.common.return_token_ids;
  out.include_usage = r.common.include_usage;

  GenerationRun run(ctx, "chatcmpl-");
  if (auto e = run.Submit({EngineJob{std::move(*ids), r.common.params, r.common.n}})) return ctx.Reply(ex, *e);

  if (r.common.stream) {
    if (!run.BeginStream(ex)) return;
    ChatStream stream(ctx, ex, run.header(), out, run.choices());
    // A failed write makes OnEvent false, and Run cancels.
    const bool began = stream.Begin();
    if (!run.Run(ex, [&](int i, const engine::GenerationEvent& ev) { return began && stream.OnEvent(i, ev); })) return;
    run.EndStream(ex, /*chat=*/true, out.include_usage);
    return;
  }
  std::vector<ChoiceState> choices(run.choices());
  const bool complete = run.Run(ex, [&](int i, const engine::GenerationEvent& ev) {
    ChoiceState& s = choices[i];
    s.text += ev.text_delta;
    s.ids.insert(s.ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (out.logprobs) {
      std::vector<LogprobEntry> entries = ctx.LogprobEntries(ev.logprobs);
      s.logprobs.insert(s.logprobs.end(), entries.begin(), entries.end());
    }
    return true;
  });
  if (!complete) return;  // nobody is listening
  if (auto failure = run.failure()) return ctx.Reply(ex, *failure);
  ex.Respond(http::Response{200, {}, "application/json", ChatResponse(run.header(), out, run, choices)});
}

}  // namespace tandem::openai
