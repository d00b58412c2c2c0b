// EngineHost::Generate: the controller's inference probe through the head's engine (greedy, with
// priority, so a busy engine answers it ahead of waiting requests).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include "agentd/engine_group.h"
#include "common/status.h"
#include "engine/tokenizer/chat_prompt.h"
#include "proto/rank_state.h"

namespace tandem::agentd {

using std::chrono::milliseconds;

absl::StatusOr<v1::GenerateResponse> EngineHost::Generate(const v1::GenerateRequest& req,
                                                          const std::function<bool()>& caller_gone) {
  const auto t0 = Clock::now();
  std::shared_ptr<Group> g;
  std::string request_id;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (state_ != v1::RANK_STATE_READY && state_ != v1::RANK_STATE_SERVING) {
      const std::string why = std::string("cannot generate: this rank is ") + RankStateName(state_) +
                              (reason_.empty() ? "" : " (" + reason_ + ")");
      // Loading or joining ends by itself: a retry works (UNAVAILABLE). Otherwise the operator acts.
      const bool passing = state_ == v1::RANK_STATE_LOADING || state_ == v1::RANK_STATE_JOINING;
      return passing ? absl::UnavailableError(why) : absl::FailedPreconditionError(why);
    }
    g = group_;
    request_id = "probe-" + std::to_string(++next_probe_id_);
  }
  if (!g || !g->stack) return absl::FailedPreconditionError("cannot generate: this rank is not the head (rank 0)");
  const tokenizer::Tokenizer* tok = g->loaded->tokenizer.get();

  engine::GenerationRequest r;
  r.request_id = request_id;
  r.priority = true;  // probes go ahead of waiting requests: a busy engine is a healthy one
  r.params.temperature = 0.0f;
  r.params.max_tokens = req.max_tokens() > 0 ? static_cast<int32_t>(req.max_tokens()) : 16;
  if (req.prompt_ids_size() > 0) {
    r.prompt_ids.assign(req.prompt_ids().begin(), req.prompt_ids().end());
  } else if (!req.prompt().empty()) {
    if (tok == nullptr) {
      return absl::FailedPreconditionError(
          g->loaded->tokenizer_error.empty()
              ? "the model folder has no tokenizer.json: send prompt_ids"
              : "the model folder's tokenizer did not load (" + g->loaded->tokenizer_error + "): send prompt_ids");
    }
    std::string text = req.prompt();
    if (req.chat()) {
      tokenizer::ChatTemplateOptions co;
      co.enable_thinking = false;  // a probe wants the answer, not a reasoning trace
      ASSIGN_OR_RETURN(text, g->stack->chat_prompt().Render({tokenizer::ChatMessage{"user", req.prompt(), std::nullopt, {}}}, co));
    }
    r.prompt_ids = tok->Encode(text);
  } else {
    return absl::InvalidArgumentError("the probe has neither prompt_ids nor prompt");
  }

  struct Result {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int32_t> ids;
    std::string text;
    bool done = false;
    std::string finish_reason;
    absl::Status error;
  };
  auto res = std::make_shared<Result>();
  RETURN_IF_ERROR(g->stack->engine().Submit(std::move(r), [res](const engine::GenerationEvent& ev) {
    std::lock_guard<std::mutex> l(res->mu);
    res->ids.insert(res->ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    res->text += ev.text_delta;
    if (ev.finished) {
      res->done = true;
      res->finish_reason = ev.finish_reason;
      res->error = ev.error;
      res->cv.notify_all();
    }
  }));
  // The wait is bounded (at most kMaxProbeWait) and ends early when the caller has gone: a probe
  // nobody waits for must not hold a gRPC thread and a sequence.
  constexpr milliseconds kMaxProbeWait{600000};
  const milliseconds timeout =
      std::min(kMaxProbeWait, milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 30000));
  const auto until = Clock::now() + timeout;
  std::unique_lock<std::mutex> l(res->mu);
  for (;;) {
    if (res->cv.wait_for(l, milliseconds(200), [&] { return res->done; })) break;
    const bool gone = caller_gone && caller_gone();
    if (gone || Clock::now() >= until) {
      l.unlock();
      g->stack->engine().Cancel(request_id);
      if (gone) return ProbeFailure(absl::CancelledError("the caller of the probe went away"));
      return ProbeFailure(
          absl::DeadlineExceededError("the probe did not finish within " + std::to_string(timeout.count()) + " ms"));
    }
  }
  if (!res->error.ok()) return ProbeFailure(absl::UnavailableError("the probe failed: " + StatusText(res->error)));
  if (res->finish_reason == "abort") {
    return ProbeFailure(absl::UnavailableError("the probe was aborted (engine shutting down)"));
  }
  v1::GenerateResponse out;
  for (int32_t id : res->ids) out.add_token_ids(id);
  out.set_text(res->text);
  out.set_seconds(SecondsSince(t0));
  return out;
}

}  // namespace tandem::agentd
