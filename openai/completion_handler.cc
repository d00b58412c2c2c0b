// POST /v1/completions: each prompt of the batch (text or token ids) with its n choices, the
// prompt echoed in front when asked (with its own logprobs when logprobs are asked too), whole
// or as Server-Sent Events.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "openai/generation_handlers.h"
#include "openai/generation_run.h"
#include "openai/response_json.h"

namespace tandem::openai {
namespace {

// One prompt, ready for the engine.
struct PreparedPrompt {
  std::vector<int32_t> ids;
  std::string text;  // echo: the prompt as text
  engine::SamplingParams params;
};

struct ChoiceState {
  std::string text;                    // non-streaming: everything; streaming: unused
  std::vector<int32_t> ids;            // likewise
  std::vector<LogprobEntry> logprobs;  // likewise
  int64_t text_offset = 0;             // streaming: where the next piece's tokens start
};

// Resolves each prompt to token ids within the context and its max_tokens.
std::optional<ApiError> Prepare(const ServerContext& ctx, CompletionRequest& r, std::vector<PreparedPrompt>* out) {
  const bool batch = r.prompts.size() > 1;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    CompletionRequest::Prompt& p = r.prompts[i];
    const std::string param = batch ? "prompt[" + std::to_string(i) + "]" : "prompt";
    PreparedPrompt prepared;
    if (p.text) {
      if (ctx.tokenizer == nullptr) {
        return InvalidRequest("this model folder has no tokenizer: send the prompt as an array of token ids", param);
      }
      std::optional<std::vector<int32_t>> encoded = ctx.EncodeWithinContext(*p.text);
      if (!encoded) return ctx.PromptTooLong(param);
      prepared.ids = std::move(*encoded);
      prepared.text = std::move(*p.text);
    } else {
      prepared.ids = std::move(p.ids);
    }
    CommonRequest common = r.common;  // max_tokens resolves per prompt (its length differs)
    if (auto e = ValidatePrompt(prepared.ids, ctx.options.vocab_size, ctx.options.max_model_len, 16, &common)) {
      if (e->param == "prompt") e->param = param;
      return e;
    }
    if (r.echo && !p.text) {
      if (ctx.tokenizer == nullptr) {
        return InvalidRequest("'echo' of a token-id prompt needs the model's tokenizer, which this folder lacks", "echo");
      }
      prepared.text = ctx.tokenizer->Decode(prepared.ids);
    }
    prepared.params = common.params;
    prepared.params.logprobs = r.common.logprobs;
    // The echoed prompt's own logprobs come from the prefill (the first token has none).
    if (r.echo && r.common.logprobs >= 0) prepared.params.prompt_logprobs = r.common.logprobs;
    out->push_back(std::move(prepared));
  }
  return std::nullopt;
}

// The echoed prompt's logprob entries: the first token without a logprob, then the engine's.
std::vector<LogprobEntry> PromptEntries(const ServerContext& ctx, const std::vector<int32_t>& ids,
                                        const std::vector<engine::TokenLogprob>& prompt_logprobs) {
  std::vector<LogprobEntry> entries;
  entries.push_back(LogprobEntry{ctx.TokenText(ids.front()), std::nullopt, {}});
  std::vector<LogprobEntry> rest = ctx.LogprobEntries(prompt_logprobs);
  entries.insert(entries.end(), rest.begin(), rest.end());
  return entries;
}

}  // namespace

void HandleCompletions(ServerContext& ctx, http::Exchange& ex) {
  if (auto e = ctx.Authorize(ex.request())) return ctx.Reply(ex, *e);
  CompletionRequest r;
  if (auto e = ParseCompletionRequest(ex.request().body, &r)) return ctx.Reply(ex, *e);
  if (auto e = ctx.CheckModelAndReady(r.common.model)) return ctx.Reply(ex, *e);
  std::vector<PreparedPrompt> prompts;
  if (auto e = Prepare(ctx, r, &prompts)) return ctx.Reply(ex, *e);

  const int n = r.common.n;
  const bool logprobs = r.common.logprobs >= 0;
  const bool token_ids = r.common.return_token_ids;
  const bool include_usage = r.common.include_usage;
  GenerationRun run(ctx, "cmpl-");
  const ResponseHeader& header = run.header();
  std::vector<EngineJob> jobs;
  for (const PreparedPrompt& p : prompts) jobs.push_back(EngineJob{p.ids, p.params, n});
  if (auto e = run.Submit(std::move(jobs))) return ctx.Reply(ex, *e);

  std::vector<ChoiceState> choices(run.choices());
  // The echo of choice i: its prompt's text, and (with logprobs) its entries once they arrive.
  auto prompt_of = [&](int choice) -> const PreparedPrompt& { return prompts[choice / n]; };
  std::vector<std::vector<LogprobEntry>> prompt_entries(prompts.size());
  std::vector<bool> echoed(choices.size(), false);

  if (r.common.stream) {
    if (!run.BeginStream(ex)) return;
    auto send = [&](const CompletionChoice& c) {
      return ex.Write(SseEvent(CompletionChunkJson(header, c, include_usage)));
    };
    const bool complete = run.Run(ex, [&](int i, const engine::GenerationEvent& ev) {
      ChoiceState& s = choices[i];
      const size_t job = static_cast<size_t>(i / n);
      if (!ev.prompt_logprobs.empty()) prompt_entries[job] = PromptEntries(ctx, prompt_of(i).ids, ev.prompt_logprobs);
      if (r.echo && !echoed[i]) {
        // The prompt is the choice's first chunk (with its logprobs: they come in the request's
        // first event, before any choice's tokens).
        echoed[i] = true;
        CompletionChoice c;
        c.index = i;
        c.text = prompt_of(i).text;
        if (logprobs) c.logprobs = &prompt_entries[job];
        if (!send(c)) return false;
        if (logprobs) s.text_offset = TextOffsetAfter(prompt_entries[job], 0);
      }
      const bool final = ev.choice_finished || ev.finished;
      if (final && (ev.finish_reason == "error" || ev.finish_reason == "abort")) return true;  // sent as an error
      std::vector<LogprobEntry> entries = logprobs ? ctx.LogprobEntries(ev.logprobs) : std::vector<LogprobEntry>{};
      if (!ev.text_delta.empty() || final || (!ev.token_ids.empty() && (logprobs || token_ids))) {
        CompletionChoice c;
        c.index = i;
        c.text = ev.text_delta;
        if (final) c.finish_reason = ev.finish_reason;
        if (logprobs) {
          c.logprobs = &entries;
          c.text_offset = s.text_offset;
          s.text_offset = TextOffsetAfter(entries, s.text_offset);
        }
        if (token_ids) c.token_ids = &ev.token_ids;
        if (!send(c)) return false;
      }
      return true;
    });
    if (complete) run.EndStream(ex, /*chat=*/false, include_usage);
    return;
  }

  const bool complete = run.Run(ex, [&](int i, const engine::GenerationEvent& ev) {
    ChoiceState& s = choices[i];
    if (!ev.prompt_logprobs.empty()) {
      prompt_entries[i / n] = PromptEntries(ctx, prompt_of(i).ids, ev.prompt_logprobs);
    }
    s.text += ev.text_delta;
    s.ids.insert(s.ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (logprobs) {
      std::vector<LogprobEntry> entries = ctx.LogprobEntries(ev.logprobs);
      s.logprobs.insert(s.logprobs.end(), entries.begin(), entries.end());
    }
    return true;
  });
  if (!complete) return;  // nobody is listening
  if (auto failure = run.failure()) return ctx.Reply(ex, *failure);
  std::vector<CompletionChoice> rendered(choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    ChoiceState& s = choices[i];
    CompletionChoice& c = rendered[i];
    c.index = static_cast<int>(i);
    c.finish_reason = run.finish_reason(c.index);
    c.text = r.echo ? prompt_of(c.index).text + s.text : s.text;
    if (logprobs) {
      if (r.echo) s.logprobs.insert(s.logprobs.begin(), prompt_entries[i / n].begin(), prompt_entries[i / n].end());
      c.logprobs = &s.logprobs;
    }
    if (token_ids) c.token_ids = &s.ids;
  }
  ex.Respond(http::Response{200, {}, "application/json", CompletionResponseJson(header, rendered, run.usage())});
}

}  // namespace tandem::openai
