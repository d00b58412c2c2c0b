#include "openai/generation_run.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

#include "common/log.h"

namespace tandem::openai {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// How long a cancelled request's final events may take before the handler stops waiting (the
// engine answers a Cancel at its next step; a wedged engine must not hold the worker forever).
constexpr std::chrono::seconds kCancelGrace{5};

}  // namespace

// The engine's events for one HTTP request, handed from the engine thread to the worker.
struct GenerationRun::Channel {
  struct Item {
    size_t job;
    engine::GenerationEvent event;
    Clock::time_point at;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> items;
  bool client_gone = false;  // set from the HTTP event loop; wakes the worker

  void Push(size_t job, const engine::GenerationEvent& e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      items.push_back({job, e, Clock::now()});
    }
    cv.notify_one();
  }
  void MarkClientGone() {
    {
      std::lock_guard<std::mutex> lock(mu);
      client_gone = true;
    }
    cv.notify_one();
  }
  // Waits up to `timeout` for the next event; nullopt on timeout or, when `stop_on_gone`, as
  // soon as the client is gone.
  std::optional<Item> Pop(std::chrono::milliseconds timeout, bool stop_on_gone) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return !items.empty() || (stop_on_gone && client_gone); }) ||
        items.empty()) {
      return std::nullopt;
    }
    Item e = std::move(items.front());
    items.pop_front();
    return e;
  }
  bool gone() {
    std::lock_guard<std::mutex> lock(mu);
    return client_gone;
  }
};

// One engine request and its latency bookkeeping (observed into the metrics as events arrive).
struct GenerationRun::Job {
  std::string engine_id;
  int32_t n = 1;
  int64_t prompt_len = 0;
  Clock::time_point arrival;
  bool submitted = false;
  bool finished = false;                               // its `finished` event arrived
  std::vector<std::optional<Clock::time_point>> last_token;  // per choice
  bool first_token_seen = false;
  int64_t tokens = 0;
  std::string reason;                                  // counted in the metrics
};

GenerationRun::GenerationRun(ServerContext& ctx, const std::string& id_prefix)
    : ctx_(ctx),
      header_{id_prefix + RandomHex(24), UnixNow(), ctx.options.served_model_name},
      channel_(std::make_shared<Channel>()) {}

GenerationRun::~GenerationRun() {
  if (counted_active_) ctx_.active.fetch_sub(1);
}

std::optional<ApiError> GenerationRun::Submit(std::vector<EngineJob> jobs) {
  const Clock::time_point arrival = Clock::now();
  jobs_.resize(jobs.size());
  int total = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    Job& job = jobs_[k];
    job.engine_id = jobs.size() == 1 ? header_.id : header_.id + "-" + std::to_string(k);
    job.n = jobs[k].n;
    job.prompt_len = static_cast<int64_t>(jobs[k].prompt_ids.size());
    job.arrival = arrival;
    job.last_token.resize(job.n);
    total += job.n;
  }
  finish_reasons_.assign(total, "");
  for (size_t k = 0; k < jobs.size(); ++k) {
    engine::GenerationRequest greq;
    greq.request_id = jobs_[k].engine_id;
    greq.prompt_ids = std::move(jobs[k].prompt_ids);
    greq.params = std::move(jobs[k].params);
    greq.n = jobs[k].n;
    auto channel = channel_;
    absl::Status st = ctx_.engine->Submit(std::move(greq), [channel, k](const engine::GenerationEvent& e) {
      channel->Push(k, e);
    });
    if (!st.ok()) {
      CancelAll();  // the jobs before this one; their events are never read
      return SubmitError(st);
    }
    jobs_[k].submitted = true;
  }
  ctx_.active.fetch_add(1);
  counted_active_ = true;
  return std::nullopt;
}

void GenerationRun::CancelAll() {
  for (const Job& job : jobs_) {
    if (job.submitted && !job.finished) ctx_.engine->Cancel(job.engine_id);
  }
}

void GenerationRun::OnFinal(Job& job, const engine::GenerationEvent& e, Clock::time_point at) {
  job.finished = true;
  usage_.prompt_tokens += e.prompt_tokens > 0 ? e.prompt_tokens : job.prompt_len;
  usage_.completion_tokens += e.completion_tokens > 0 ? e.completion_tokens : job.tokens;
  ServeMetrics& m = *ctx_.metrics;
  m.ObserveEndToEndLatency(Seconds(at - job.arrival));
  m.AddPromptTokens(e.prompt_tokens > 0 ? e.prompt_tokens : job.prompt_len);
  m.CountFinishedRequest(job.reason);
}

bool GenerationRun::BeginStream(http::Exchange& ex) {
  if (ex.BeginStream(200, {{"Cache-Control", "no-cache"}}, "text/event-stream")) return true;
  Run(ex, [](int, const engine::GenerationEvent&) { return false; });  // nobody to write to: cancels
  return false;
}

void GenerationRun::EndStream(http::Exchange& ex, bool chat, bool include_usage) const {
  if (failure_) {
    ex.Write(SseEvent(ErrorJson(*failure_)));
  } else if (include_usage) {
    ex.Write(SseEvent(UsageChunkJson(header_, chat, usage_)));
  }
  ex.Write(SseDone());
  ex.EndStream();
}

bool GenerationRun::Run(http::Exchange& ex,
                        const std::function<bool(int choice, const engine::GenerationEvent&)>& deliver) {
  // The HTTP loop sees the client go away (streaming or not): wake this worker to cancel.
  auto channel = channel_;
  ex.OnClientGone([channel] { channel->MarkClientGone(); });
  size_t open_jobs = jobs_.size();
  bool writing = true, cancelled = false;
  Clock::time_point cancel_deadline;
  while (open_jobs > 0) {
    if (!cancelled && (!writing || channel_->gone())) {
      // The client went away: free the sequences' KV blocks now, then wait for the engine's
      // final "abort" events so that they are counted like any other finish.
      TLOG(INFO) << "client of " << header_.id << " disconnected; cancelling";
      CancelAll();
      cancelled = true;
      cancel_deadline = Clock::now() + kCancelGrace;
    }
    std::optional<Channel::Item> item = channel_->Pop(std::chrono::milliseconds(500), /*stop_on_gone=*/!cancelled);
    if (!item) {
      if (cancelled && Clock::now() > cancel_deadline) break;
      continue;
    }
    Job& job = jobs_[item->job];
    const engine::GenerationEvent& ev = item->event;
    const int choice = static_cast<int>(item->job) * job.n + ev.choice;
    if (ev.choice < 0 || ev.choice >= job.n) {
      // An engine bug; the request must still end when the engine says it has.
      TLOG(ERROR) << header_.id << ": the engine sent choice " << ev.choice << " of " << job.n;
      if (ev.finished) {
        OnFinal(job, ev, item->at);
        --open_jobs;
      }
      continue;
    }
    const int64_t n_tokens = static_cast<int64_t>(ev.token_ids.size());
    if (n_tokens > 0) {
      ServeMetrics& m = *ctx_.metrics;
      auto& last = job.last_token[ev.choice];
      if (!job.first_token_seen) {
        m.ObserveTimeToFirstToken(Seconds(item->at - job.arrival));
        job.first_token_seen = true;
      } else if (last) {
        // Several tokens in one event (rare) share the gap evenly.
        const double gap = Seconds(item->at - *last) / static_cast<double>(n_tokens);
        for (int64_t i = 0; i < n_tokens; ++i) m.ObserveInterTokenLatency(gap);
      }
      last = item->at;
      job.tokens += n_tokens;
      m.AddGenerationTokens(n_tokens);
    }
    if (ev.choice_finished || ev.finished) {
      finish_reasons_[choice] = ev.finish_reason;
      // The request's reason in the metrics: a failure wins over an abort over the first finish.
      if (job.reason.empty() || ev.finish_reason == "error" ||
          (ev.finish_reason == "abort" && job.reason != "error")) {
        job.reason = ev.finish_reason;
      }
      if ((ev.finish_reason == "error" || ev.finish_reason == "abort") && !failure_) {
        failure_ = MakeError(503, "server_error",
                             ev.finish_reason == "abort" ? "the request was aborted (server shutting down)"
                                                         : "generation failed: " + std::string(ev.error.message()),
                             "engine_unavailable");
      }
    }
    if (writing && !cancelled) writing = deliver(choice, ev);
    if (ev.finished) {
      OnFinal(job, ev, item->at);
      --open_jobs;
    }
  }
  for (Job& job : jobs_) {
    if (!job.finished) ctx_.metrics->CountFinishedRequest("abort");  // the engine never confirmed the cancel
  }
  return open_jobs == 0 && !cancelled && writing;
}

}  // namespace tandem::openai
