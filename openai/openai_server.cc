#include "openai/openai_server.h"

#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "openai/openai_protocol.h"
#include "http/server.h"

namespace tandem::openai {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The engine's events for one request, handed from the engine thread to the request's worker.
struct TimedEvent {
  engine::GenerationEvent event;
  Clock::time_point at;
};

struct RequestChannel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<TimedEvent> events;
  bool client_gone = false;  // set from the HTTP event loop; wakes the worker

  void Push(const engine::GenerationEvent& e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back({e, Clock::now()});
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
  std::optional<TimedEvent> Pop(std::chrono::milliseconds timeout, bool stop_on_gone) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return !events.empty() || (stop_on_gone && client_gone); }) ||
        events.empty()) {
      return std::nullopt;
    }
    TimedEvent e = std::move(events.front());
    events.pop_front();
    return e;
  }
  bool gone() {
    std::lock_guard<std::mutex> lock(mu);
    return client_gone;
  }
};

// Latency bookkeeping of one request, observed into the metrics as events arrive.
struct RequestTimer {
  Clock::time_point arrival;
  std::optional<Clock::time_point> last_token;
  int64_t tokens = 0;

  void OnEvent(const TimedEvent& e, ServeMetrics& m) {
    const int64_t n = static_cast<int64_t>(e.event.token_ids.size());
    if (n == 0) return;
    if (!last_token) {
      m.ObserveTimeToFirstToken(Seconds(e.at - arrival));
    } else {
      // Several tokens in one event (rare) share the gap evenly.
      const double gap = Seconds(e.at - *last_token) / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) m.ObserveInterTokenLatency(gap);
    }
    last_token = e.at;
    tokens += n;
    m.AddGenerationTokens(n);
  }
};

std::string RandomHex(int n) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string s(n, '0');
  for (char& c : s) c = kHex[rng() & 15];
  return s;
}

ApiError MakeError(int status, std::string type, std::string message, std::string code = "") {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

// The errors the HTTP layer makes itself (framing, limits, deadlines, caps), in OpenAI's shape.
ApiError HttpError(int status, const std::string& message) {
  switch (status) {
    case 404: return MakeError(status, "invalid_request_error", message, "unknown_route");
    case 405: return MakeError(status, "invalid_request_error", message, "method_not_allowed");
    case 408: return MakeError(status, "invalid_request_error", message, "request_timeout");
    case 413: return MakeError(status, "invalid_request_error", message, "request_too_large");
    case 429: return MakeError(status, "rate_limit_error", message, "server_overloaded");
    case 431: return MakeError(status, "invalid_request_error", message, "headers_too_large");
    default:
      return MakeError(status, status < 500 ? "invalid_request_error" : "server_error", message,
                       status == 503 ? "server_unavailable" : "");
  }
}

// How long a cancelled sequence's final event may take before the handler stops waiting (the
// engine answers a Cancel at its next step; a wedged engine must not hold the worker forever).
constexpr std::chrono::seconds kCancelGrace{5};

// No chat prompt given: the built-in ChatML.
OpenAIServerOptions WithChatPrompt(OpenAIServerOptions o) {
  if (!o.chat_prompt) o.chat_prompt = tokenizer::ChatPrompt::ChatML();
  return o;
}

}  // namespace

class OpenAIServer::Handlers {
 public:
  Handlers(engine::LLMEngine* engine, const tokenizer::Tokenizer* tokenizer, ServeMetrics* metrics,
           const OpenAIServerOptions& options)
      : engine_(engine), tokenizer_(tokenizer), metrics_(metrics), options_(WithChatPrompt(options)) {}

  std::atomic<bool> draining{false};
  std::atomic<int> active{0};

  http::Response Error(const ApiError& e) {
    http::Response r;
    r.status = e.http_status;
    if (e.http_status == 429 || e.http_status == 503) {
      r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_seconds));
    }
    if (e.http_status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    r.body = ErrorJson(e);
    metrics_->CountRejectedRequest(e.http_status);
    return r;
  }
  http::Response RenderHttpError(int status, const std::string& message) { return Error(HttpError(status, message)); }

  // nullopt when the request may use /v1/*.
  std::optional<ApiError> Authorize(const http::Request& req) const {
    if (options_.api_key.empty()) return std::nullopt;
    const std::string want = "Bearer " + options_.api_key;
    const std::string_view got = req.Header("Authorization").value_or("");
    // Compare every byte regardless of where the first difference is.
    const bool same = got.size() == want.size();
    unsigned char diff = 0;
    for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned char>(want[i] ^ (i < got.size() ? got[i] : 0));
    if (same && diff == 0) return std::nullopt;
    return MakeError(401, "authentication_error",
                     got.empty() ? "missing API key: send 'Authorization: Bearer <key>'" : "incorrect API key",
                     "invalid_api_key");
  }

  bool Ready() const {
    return !draining.load() && engine_->healthy() && (!options_.ready || options_.ready());
  }

  // ---- Inline routes (the event loop: quick, never blocking) ----

  http::Response Health(const http::Request&) {
    if (Ready()) return http::Response{200, {}, "application/json", "{\"status\":\"ok\"}"};
    const std::string why = draining.load()         ? "shutting down"
                            : !engine_->healthy() ? "engine failed: " + std::string(engine_->fatal_error().message())
                                                  : "not ready";
    http::Response r{503, {}, "application/json", ErrorJson(MakeError(503, "server_error", why, "not_ready"))};
    r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_seconds));
    return r;
  }

  // Set once the HTTP server exists; read only on its event loop (the /metrics route).
  const http::Server* http = nullptr;

  http::Response Metrics(const http::Request&) {
    metrics_->UpdateFromStats(engine_->Stats());
    if (http != nullptr) {
      const http::ServerStats st = http->Stats();
      metrics_->UpdateFromHttp({st.connections, st.evicted_total, st.timed_out_total, st.client_gone_total});
    }
    return http::Response{200, {}, "text/plain; version=0.0.4; charset=utf-8", metrics_->Text()};
  }

  http::Response Models(const http::Request& req) {
    if (auto e = Authorize(req)) return Error(*e);
    return http::Response{200, {}, "application/json",
                          ModelsJson(options_.served_model_name, created_, options_.max_model_len)};
  }

  // ---- Worker routes ----

  void Completions(http::Exchange& ex) {
    if (auto e = Authorize(ex.request())) return Reply(ex, *e);
    CompletionRequest r;
    if (auto e = ParseCompletionRequest(ex.request().body, &r)) return Reply(ex, *e);
    if (auto e = CheckModelAndReady(r.common.model)) return Reply(ex, *e);
    std::vector<int32_t> ids = std::move(r.prompt_ids);
    if (r.prompt_text) {
      if (tokenizer_ == nullptr) {
        return Reply(ex, InvalidRequest("this model folder has no tokenizer: send the prompt as an array of token ids",
                                        "prompt"));
      }
      std::optional<std::vector<int32_t>> encoded = EncodeWithinContext(*r.prompt_text);
      if (!encoded) return Reply(ex, PromptTooLong("prompt"));
      ids = std::move(*encoded);
    }
    if (auto e = ValidatePrompt(ids, options_.vocab_size, options_.max_model_len, 16, &r.common)) return Reply(ex, *e);
    Generate(ex, /*chat=*/false, std::move(ids), r.common);
  }

  void ChatCompletions(http::Exchange& ex) {
    if (auto e = Authorize(ex.request())) return Reply(ex, *e);
    ChatRequest r;
    if (auto e = ParseChatRequest(ex.request().body, &r)) return Reply(ex, *e);
    if (auto e = CheckModelAndReady(r.common.model)) return Reply(ex, *e);
    if (tokenizer_ == nullptr) {
      return Reply(ex, InvalidRequest("this model folder has no tokenizer: chat needs one; use "
                                      "/v1/completions with token ids",
                                      "messages"));
    }
    tokenizer::ChatTemplateOptions topts;
    topts.add_generation_prompt = true;
    topts.enable_thinking = r.enable_thinking;
    topts.tools = r.tools;
    absl::StatusOr<std::string> prompt = options_.chat_prompt->Render(r.messages, topts);
    // The template refused the conversation (raise_exception, e.g. roles out of order).
    if (!prompt.ok()) return Reply(ex, InvalidRequest(std::string(prompt.status().message()), "messages"));
    std::optional<std::vector<int32_t>> ids = EncodeWithinContext(*prompt);
    if (!ids) return Reply(ex, PromptTooLong("messages"));
    // The end of an assistant turn ends generation even when config.json names another eos.
    if (auto im_end = tokenizer_->TokenId("<|im_end|>")) r.common.params.stop_token_ids.push_back(*im_end);
    if (auto e = ValidatePrompt(*ids, options_.vocab_size, options_.max_model_len, 0, &r.common)) return Reply(ex, *e);
    Generate(ex, /*chat=*/true, std::move(*ids), r.common);
  }

 private:
  void Reply(http::Exchange& ex, const ApiError& e) { ex.Respond(Error(e)); }

  // A prompt longer than the context is refused after about max_model_len tokens of work, not
  // after tokenizing all of it (a 4 MiB body of text is ~1M tokens).
  std::optional<std::vector<int32_t>> EncodeWithinContext(std::string_view text) const {
    return tokenizer_->EncodeAtMost(text, static_cast<size_t>(std::max<int32_t>(0, options_.max_model_len)));
  }
  ApiError PromptTooLong(const std::string& param) const {
    return InvalidRequest("this model's maximum context length is " + std::to_string(options_.max_model_len) +
                              " tokens; the prompt alone is longer",
                          param, "context_length_exceeded");
  }

  std::optional<ApiError> CheckModelAndReady(const std::string& model) {
    if (!model.empty() && model != options_.served_model_name) {
      ApiError e = MakeError(404, "invalid_request_error",
                             "the model '" + model + "' does not exist; this server serves '" +
                                 options_.served_model_name + "'",
                             "model_not_found");
      e.param = "model";
      return e;
    }
    if (!Ready()) {
      return MakeError(503, "server_error", draining.load() ? "the server is shutting down" : "the engine is not ready",
                       "engine_unavailable");
    }
    return std::nullopt;
  }

  // Submits and answers, streaming or not. `common.params.max_tokens` is resolved.
  void Generate(http::Exchange& ex, bool chat, std::vector<int32_t> prompt_ids, const CommonRequest& common) {
    RequestTimer timer;
    timer.arrival = Clock::now();
    ResponseHeader header;
    header.id = (chat ? "chatcmpl-" : "cmpl-") + RandomHex(24);
    header.created = UnixNow();
    header.model = options_.served_model_name;
    const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());

    auto channel = std::make_shared<RequestChannel>();
    engine::GenerationRequest greq;
    greq.request_id = header.id;
    greq.prompt_ids = std::move(prompt_ids);
    greq.params = common.params;
    absl::Status st = engine_->Submit(std::move(greq), [channel](const engine::GenerationEvent& e) { channel->Push(e); });
    if (!st.ok()) return Reply(ex, SubmitError(st));
    active.fetch_add(1);
    // The HTTP loop sees the client go away (streaming or not): wake this worker to cancel.
    ex.OnClientGone([channel] { channel->MarkClientGone(); });

    const bool usage_null = common.include_usage;
    std::string text;
    std::vector<int32_t> ids;
    bool writing = true;  // streaming: false once a write failed
    if (common.stream) {
      writing = ex.BeginStream(200, {{"Cache-Control", "no-cache"}}, "text/event-stream") &&
                (!chat || ex.Write(SseEvent(ChatChunkJson(header, "assistant", true, "", "", usage_null, nullptr))));
    }
    std::optional<TimedEvent> last;
    bool cancelled = false;
    Clock::time_point cancel_deadline;
    for (;;) {
      if (!cancelled && (!writing || channel->gone())) {
        // The client went away: free the sequence's KV blocks now, then wait for the engine's
        // final "abort" so that it is counted like any other finish.
        TLOG(INFO) << "client of " << header.id << " disconnected; cancelling";
        engine_->Cancel(header.id);
        cancelled = true;
        cancel_deadline = Clock::now() + kCancelGrace;
      }
      std::optional<TimedEvent> e = channel->Pop(std::chrono::milliseconds(500), /*stop_on_gone=*/!cancelled);
      if (!e) {
        if (cancelled && Clock::now() > cancel_deadline) break;  // counted below as an abort
        continue;
      }
      timer.OnEvent(*e, *metrics_);
      const engine::GenerationEvent& ev = e->event;
      if (!common.stream) {
        text += ev.text_delta;
        ids.insert(ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      } else if (writing && !cancelled) {
        const std::vector<int32_t>* tid = common.return_token_ids ? &ev.token_ids : nullptr;
        if (!ev.text_delta.empty() || (tid != nullptr && !ev.token_ids.empty())) {
          const std::string chunk = chat ? ChatChunkJson(header, "", true, ev.text_delta, "", usage_null, tid)
                                         : CompletionChunkJson(header, ev.text_delta, "", usage_null, tid);
          writing = ex.Write(SseEvent(chunk));
        }
      }
      if (ev.finished) {
        last = std::move(e);
        break;
      }
    }
    if (last) {
      Finish(*last, timer, prompt_len);
    } else {
      metrics_->CountFinishedRequest("abort");  // the engine never confirmed the cancel
    }
    active.fetch_sub(1);
    if (cancelled || !last) return;  // nobody is listening

    const engine::GenerationEvent& fin = last->event;
    const bool failed = fin.finish_reason == "error" || fin.finish_reason == "abort";
    const ApiError failure = MakeError(503, "server_error",
                                       fin.finish_reason == "abort" ? "the request was aborted (server shutting down)"
                                                                    : "generation failed: " + std::string(fin.error.message()),
                                       "engine_unavailable");
    if (!common.stream) {
      if (failed) return Reply(ex, failure);
      const Usage usage = UsageOf(*last, prompt_len, timer.tokens);
      const std::vector<int32_t>* tid = common.return_token_ids ? &ids : nullptr;
      ex.Respond(http::Response{200, {}, "application/json",
                                chat ? ChatResponseJson(header, text, fin.finish_reason, usage, tid)
                                     : CompletionResponseJson(header, text, fin.finish_reason, usage, tid)});
      return;
    }
    if (failed) {
      // Headers are gone already: the error travels as an SSE event (as vLLM does).
      ex.Write(SseEvent(ErrorJson(failure)));
    } else {
      const std::string chunk = chat ? ChatChunkJson(header, "", false, "", fin.finish_reason, usage_null, nullptr)
                                     : CompletionChunkJson(header, "", fin.finish_reason, usage_null, nullptr);
      ex.Write(SseEvent(chunk));
      if (common.include_usage) ex.Write(SseEvent(UsageChunkJson(header, chat, UsageOf(*last, prompt_len, timer.tokens))));
    }
    ex.Write(SseDone());
    ex.EndStream();
  }

  void Finish(const TimedEvent& last, const RequestTimer& timer, int64_t prompt_len) {
    metrics_->ObserveEndToEndLatency(Seconds(last.at - timer.arrival));
    metrics_->AddPromptTokens(last.event.prompt_tokens > 0 ? last.event.prompt_tokens : prompt_len);
    metrics_->CountFinishedRequest(last.event.finish_reason);
  }

  static Usage UsageOf(const TimedEvent& last, int64_t prompt_len, int64_t tokens_seen) {
    Usage u;
    u.prompt_tokens = last.event.prompt_tokens > 0 ? last.event.prompt_tokens : prompt_len;
    u.completion_tokens = last.event.completion_tokens > 0 ? last.event.completion_tokens : tokens_seen;
    return u;
  }

  static ApiError SubmitError(const absl::Status& st) {
    const std::string msg(st.message());
    switch (st.code()) {
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kOutOfRange:
        return InvalidRequest(msg);
      case absl::StatusCode::kResourceExhausted:
        return MakeError(429, "rate_limit_error", "the server is overloaded (" + msg + "); retry later",
                         "engine_overloaded");
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kFailedPrecondition:
      case absl::StatusCode::kAborted:
      case absl::StatusCode::kDeadlineExceeded:
      case absl::StatusCode::kCancelled:
        return MakeError(503, "server_error", "the engine is unavailable: " + msg, "engine_unavailable");
      default:
        return MakeError(500, "server_error", "internal error: " + msg, "internal_error");
    }
  }

  engine::LLMEngine* const engine_;
  const tokenizer::Tokenizer* const tokenizer_;
  ServeMetrics* const metrics_;
  const OpenAIServerOptions options_;
  const int64_t created_ = UnixNow();
};

OpenAIServer::OpenAIServer(engine::LLMEngine* engine, const tokenizer::Tokenizer* tokenizer, ServeMetrics* metrics,
                           OpenAIServerOptions options)
    : options_(std::move(options)),
      handlers_(std::make_unique<Handlers>(engine, tokenizer, metrics, options_)) {}

OpenAIServer::~OpenAIServer() { Stop(); }

int OpenAIServer::active_requests() const { return handlers_ ? handlers_->active.load() : 0; }

absl::Status OpenAIServer::Start() {
  if (http_) return absl::FailedPreconditionError("the server is already started");
  // tandem_http writes with MSG_NOSIGNAL; other sockets of this process (the TP transport, the
  // agent's exporters) may not, and a peer that closes must cost an error code, not the process.
  signal(SIGPIPE, SIG_IGN);
  http::ServerOptions ho;
  ho.host = options_.host;
  ho.port = options_.port;
  ho.limits.max_body_bytes = options_.max_body_bytes;
  ho.header_timeout = options_.header_timeout;
  ho.body_timeout = options_.body_timeout;
  ho.idle_timeout = options_.idle_timeout;
  ho.write_timeout = options_.write_timeout;
  ho.max_connections = options_.max_connections;
  ho.max_in_flight = std::max(2, options_.max_in_flight);
  ho.retry_after_seconds = options_.retry_after_seconds;
  http_ = std::make_unique<http::Server>(ho);
  Handlers* h = handlers_.get();
  http_->HandleInline("GET", "/health", [h](const http::Request& q) { return h->Health(q); });
  http_->HandleInline("GET", "/metrics", [h](const http::Request& q) { return h->Metrics(q); });
  http_->HandleInline("GET", "/v1/models", [h](const http::Request& q) { return h->Models(q); });
  http_->Handle("POST", "/v1/completions", [h](http::Exchange& ex) { h->Completions(ex); });
  http_->Handle("POST", "/v1/chat/completions", [h](http::Exchange& ex) { h->ChatCompletions(ex); });
  http_->SetErrorRenderer([h](int status, const std::string& message) { return h->RenderHttpError(status, message); });
  absl::Status st = http_->Start();
  if (!st.ok()) {
    http_.reset();
    return st;
  }
  port_ = http_->port();
  h->http = http_.get();
  return absl::OkStatus();
}

int OpenAIServer::Drain(std::chrono::milliseconds deadline) {
  if (!handlers_) return 0;  // stopped, with a handler left behind
  handlers_->draining = true;
  const Clock::time_point until = Clock::now() + deadline;
  while (handlers_->active.load() > 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return handlers_->active.load();
}

void OpenAIServer::StopListening() {
  if (http_) http_->StopListening();
}

bool OpenAIServer::Stop(std::chrono::milliseconds deadline) {
  if (!http_) return true;
  const bool clean = http_->Stop(deadline);  // the event loop (the only reader of handlers_->http) has ended
  handlers_->http = nullptr;
  http_.reset();
  if (!clean) {
    TLOG(WARN) << "OpenAI server: a request handler did not finish in time; its state is left behind";
    (void)handlers_.release();  // deliberately leaked: the handler still running uses it
  }
  return clean;
}

}  // namespace tandem::openai
