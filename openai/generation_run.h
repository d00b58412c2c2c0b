// One HTTP request's generation: its engine requests (one per prompt; each with n choices),
// their events handed from the engine thread to the request's worker thread, the client's
// disconnect turned into a Cancel, and the latency / token / finish metrics. The endpoint
// handlers (chat_handler, completion_handler) render what it delivers.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/batching/llm_engine.h"
#include "http/server.h"
#include "openai/openai_protocol.h"
#include "openai/response_json.h"
#include "openai/server_context.h"

namespace tandem::openai {

// One engine request: a prompt and its n choices.
struct EngineJob {
  std::vector<int32_t> prompt_ids;
  engine::SamplingParams params;  // max_tokens resolved
  int32_t n = 1;
};

class GenerationRun {
 public:
  // The response is "<id_prefix><random>" ("chatcmpl-", "cmpl-"); its engine requests are that
  // id (one job) or "<id>-<job>".
  GenerationRun(ServerContext& ctx, const std::string& id_prefix);
  ~GenerationRun();
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  // Submits every job, all or none: when the engine refuses one, those already submitted are
  // cancelled and the refusal is returned as the client should see it.
  std::optional<ApiError> Submit(std::vector<EngineJob> jobs);

  // Delivers every event with its choice index (job * n + choice, OpenAI's prompt-major order),
  // in arrival order, until every choice has finished or the client is gone; a choice's final
  // event has choice_finished (or finished) set. `deliver` returns false when a write failed
  // (the client is gone: everything is cancelled). Returns true when the result is complete and
  // someone is still listening.
  bool Run(http::Exchange& ex, const std::function<bool(int choice, const engine::GenerationEvent&)>& deliver);

  // Streaming: starts the event stream (false: the client is gone, and everything is cancelled).
  bool BeginStream(http::Exchange& ex);
  // Streaming, after a complete Run: the error event when a choice failed (the status line is
  // gone already: as vLLM does) or else the usage chunk if asked, then [DONE].
  void EndStream(http::Exchange& ex, bool chat, bool include_usage) const;

  const ResponseHeader& header() const { return header_; }
  int choices() const { return static_cast<int>(finish_reasons_.size()); }
  // After a complete Run: each choice's finish_reason, the usage of all of them, and the error
  // to send when a choice failed or was aborted (nullopt when none did).
  const std::string& finish_reason(int choice) const { return finish_reasons_[choice]; }
  Usage usage() const { return usage_; }
  std::optional<ApiError> failure() const { return failure_; }

 private:
  struct Channel;
  struct Job;
  void CancelAll();
  void OnFinal(Job& job, const engine::GenerationEvent& e, std::chrono::steady_clock::time_point at);

  ServerContext& ctx_;
  const ResponseHeader header_;
  std::shared_ptr<Channel> channel_;
  std::vector<Job> jobs_;
  std::vector<std::string> finish_reasons_;
  Usage usage_;
  std::optional<ApiError> failure_;
  bool counted_active_ = false;
};

}  // namespace tandem::openai
