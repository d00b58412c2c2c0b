#include "engine/serve/openai_server.h"

#include <signal.h>
#include <sys/socket.h>

#include <cerrno>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "common/log.h"
#include "engine/serve/openai_protocol.h"
#include "httplib.h"

namespace tandem::serve {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The engine's events for one request, handed from the engine thread to the HTTP thread.
struct TimedEvent {
  engine::GenerationEvent event;
  Clock::time_point at;
};

struct RequestChannel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<TimedEvent> events;

  void Push(const engine::GenerationEvent& e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back({e, Clock::now()});
    }
    cv.notify_one();
  }
  // Waits up to `timeout` for the next event.
  std::optional<TimedEvent> Pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return !events.empty(); })) return std::nullopt;
    TimedEvent e = std::move(events.front());
    events.pop_front();
    return e;
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

}  // namespace

// The route handlers; a class so that they share the server's state without a lambda each.
class OpenAIServer::Handlers {
 public:
  explicit Handlers(OpenAIServer& s) : s_(s) {}

  void SendError(httplib::Response& res, const ApiError& e) {
    res.status = e.http_status;
    if (e.http_status == 429 || e.http_status == 503) {
      res.set_header("Retry-After", std::to_string(s_.options_.retry_after_seconds));
    }
    if (e.http_status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(ErrorJson(e), "application/json");
    s_.metrics_->CountRejectedRequest(e.http_status);
  }

  // True when the request may use /v1/*; else the 401 is written.
  bool Authorize(const httplib::Request& req, httplib::Response& res) {
    if (s_.options_.api_key.empty()) return true;
    const std::string want = "Bearer " + s_.options_.api_key;
    const std::string got = req.get_header_value("Authorization");
    // Compare every byte regardless of where the first difference is.
    bool same = got.size() == want.size();
    unsigned char diff = 0;
    for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned char>(want[i] ^ (i < got.size() ? got[i] : 0));
    if (same && diff == 0) return true;
    SendError(res, MakeError(401, "authentication_error",
                             got.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                                         : "incorrect API key",
                             "invalid_api_key"));
    return false;
  }

  bool Ready() const {
    return !s_.draining_.load() && s_.engine_->healthy() && (!s_.options_.ready || s_.options_.ready());
  }

  void Health(const httplib::Request&, httplib::Response& res) {
    if (Ready()) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
      return;
    }
    res.status = 503;
    res.set_header("Retry-After", std::to_string(s_.options_.retry_after_seconds));
    std::string why = s_.draining_.load()         ? "shutting down"
                      : !s_.engine_->healthy() ? "engine failed: " + std::string(s_.engine_->fatal_error().message())
                                               : "not ready";
    res.set_content(ErrorJson(MakeError(503, "server_error", why, "not_ready")), "application/json");
  }

  void Metrics(const httplib::Request&, httplib::Response& res) {
    s_.metrics_->UpdateFromStats(s_.engine_->Stats());
    res.set_content(s_.metrics_->Text(), "text/plain; version=0.0.4; charset=utf-8");
  }

  void Models(const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res)) return;
    res.set_content(ModelsJson(s_.options_.served_model_name, created_, s_.options_.max_model_len),
                    "application/json");
  }

  void Completions(const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res)) return;
    CompletionRequest r;
    if (auto e = ParseCompletionRequest(req.body, &r)) return SendError(res, *e);
    if (auto e = CheckModelAndReady(r.common.model)) return SendError(res, *e);
    std::vector<int32_t> ids = std::move(r.prompt_ids);
    if (r.prompt_text) {
      if (s_.tokenizer_ == nullptr) {
        return SendError(res, InvalidRequest("this model folder has no tokenizer: send the prompt as an array of token ids",
                                             "prompt"));
      }
      ids = s_.tokenizer_->Encode(*r.prompt_text);
    }
    if (auto e = ValidatePrompt(ids, s_.options_.vocab_size, s_.options_.max_model_len, 16, &r.common)) {
      return SendError(res, *e);
    }
    Generate(req, res, /*chat=*/false, std::move(ids), r.common);
  }

  void ChatCompletions(const httplib::Request& req, httplib::Response& res) {
    if (!Authorize(req, res)) return;
    ChatRequest r;
    if (auto e = ParseChatRequest(req.body, &r)) return SendError(res, *e);
    if (auto e = CheckModelAndReady(r.common.model)) return SendError(res, *e);
    if (s_.tokenizer_ == nullptr) {
      return SendError(res, InvalidRequest("this model folder has no tokenizer: chat needs one; use "
                                           "/v1/completions with token ids",
                                           "messages"));
    }
    tokenizer::ChatTemplateOptions topts;
    topts.add_generation_prompt = true;
    topts.enable_thinking = r.enable_thinking;
    topts.tools = r.tools;
    std::vector<int32_t> ids = s_.tokenizer_->Encode(tokenizer::ApplyChatTemplate(r.messages, topts));
    // The end of an assistant turn ends generation even when config.json names another eos.
    if (auto im_end = s_.tokenizer_->TokenId("<|im_end|>")) r.common.params.stop_token_ids.push_back(*im_end);
    if (auto e = ValidatePrompt(ids, s_.options_.vocab_size, s_.options_.max_model_len, 0, &r.common)) {
      return SendError(res, *e);
    }
    Generate(req, res, /*chat=*/true, std::move(ids), r.common);
  }

 private:
  std::optional<ApiError> CheckModelAndReady(const std::string& model) {
    if (!model.empty() && model != s_.options_.served_model_name) {
      ApiError e = MakeError(404, "invalid_request_error",
                             "the model '" + model + "' does not exist; this server serves '" +
                                 s_.options_.served_model_name + "'",
                             "model_not_found");
      e.param = "model";
      return e;
    }
    if (!Ready()) {
      return MakeError(503, "server_error",
                       s_.draining_.load() ? "the server is shutting down" : "the engine is not ready",
                       "engine_unavailable");
    }
    return std::nullopt;
  }

  // Submits and answers, streaming or not. `common.params.max_tokens` is resolved.
  void Generate(const httplib::Request& req, httplib::Response& res, bool chat, std::vector<int32_t> prompt_ids,
                const CommonRequest& common) {
    const Clock::time_point arrival = Clock::now();
    ResponseHeader header;
    header.id = (chat ? "chatcmpl-" : "cmpl-") + RandomHex(24);
    header.created = UnixNow();
    header.model = s_.options_.served_model_name;
    const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());

    auto channel = std::make_shared<RequestChannel>();
    engine::GenerationRequest greq;
    greq.request_id = header.id;
    greq.prompt_ids = std::move(prompt_ids);
    greq.params = common.params;
    absl::Status st = s_.engine_->Submit(std::move(greq), [channel](const engine::GenerationEvent& e) { channel->Push(e); });
    if (!st.ok()) return SendError(res, SubmitError(st));

    s_.active_requests_.fetch_add(1);
    auto timer = std::make_shared<RequestTimer>();
    timer->arrival = arrival;
    if (!common.stream) {
      std::string text;
      std::vector<int32_t> ids;
      TimedEvent last;
      // Without a streaming body there is no write that could notice a closed client; the
      // sequence runs to its end (bounded by max_tokens).
      for (;;) {
        std::optional<TimedEvent> e = channel->Pop(std::chrono::milliseconds(500));
        if (!e) continue;
        timer->OnEvent(*e, *s_.metrics_);
        text += e->event.text_delta;
        ids.insert(ids.end(), e->event.token_ids.begin(), e->event.token_ids.end());
        if (e->event.finished) {
          last = std::move(*e);
          break;
        }
      }
      Finish(last, *timer, prompt_len);
      s_.active_requests_.fetch_sub(1);
      if (last.event.finish_reason == "error" || last.event.finish_reason == "abort") {
        return SendError(res, MakeError(503, "server_error",
                                        last.event.finish_reason == "abort"
                                            ? "the request was aborted (server shutting down)"
                                            : "generation failed: " + std::string(last.event.error.message()),
                                        "engine_unavailable"));
      }
      const Usage usage = UsageOf(last, prompt_len, timer->tokens);
      const std::vector<int32_t>* tid = common.return_token_ids ? &ids : nullptr;
      res.set_content(chat ? ChatResponseJson(header, text, last.event.finish_reason, usage, tid)
                           : CompletionResponseJson(header, text, last.event.finish_reason, usage, tid),
                      "application/json");
      return;
    }

    // Streaming: the provider runs on this connection's HTTP thread after the headers are sent.
    auto done = std::make_shared<bool>(false);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, channel, timer, done, header, chat, common, prompt_len](size_t, httplib::DataSink& sink) {
          auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
          const bool usage_null = common.include_usage;
          if (chat && !write(SseEvent(ChatChunkJson(header, "assistant", true, "", "", usage_null, nullptr)))) {
            return false;  // the releaser cancels
          }
          for (;;) {
            std::optional<TimedEvent> e = channel->Pop(std::chrono::milliseconds(500));
            if (!e) continue;
            timer->OnEvent(*e, *s_.metrics_);
            const engine::GenerationEvent& ev = e->event;
            const std::vector<int32_t>* tid = common.return_token_ids ? &ev.token_ids : nullptr;
            if (!ev.text_delta.empty() || (tid != nullptr && !ev.token_ids.empty())) {
              const std::string chunk = chat ? ChatChunkJson(header, "", true, ev.text_delta, "", usage_null, tid)
                                             : CompletionChunkJson(header, ev.text_delta, "", usage_null, tid);
              if (!write(SseEvent(chunk))) return false;
            }
            if (!ev.finished) continue;
            *done = true;
            Finish(*e, *timer, prompt_len);
            if (ev.finish_reason == "error" || ev.finish_reason == "abort") {
              // Headers are gone already: the error travels as an SSE event (as vLLM does).
              write(SseEvent(ErrorJson(MakeError(503, "server_error",
                                                 ev.finish_reason == "abort"
                                                     ? "the request was aborted (server shutting down)"
                                                     : "generation failed: " + std::string(ev.error.message()),
                                                 "engine_unavailable"))));
            } else {
              const std::string chunk = chat ? ChatChunkJson(header, "", false, "", ev.finish_reason, usage_null, nullptr)
                                             : CompletionChunkJson(header, "", ev.finish_reason, usage_null, nullptr);
              if (!write(SseEvent(chunk))) return false;
              if (common.include_usage &&
                  !write(SseEvent(UsageChunkJson(header, chat, UsageOf(*e, prompt_len, timer->tokens))))) {
                return false;
              }
            }
            write(SseDone());
            sink.done();
            return true;
          }
        },
        [this, done, channel, id = header.id](bool) {
          if (!*done) {
            // The client went away (a write failed, or the connection broke before the
            // body started): free the sequence's KV blocks now, and drain its events so the
            // final "abort" still counts.
            TLOG(INFO) << "client of " << id << " disconnected; cancelling";
            s_.engine_->Cancel(id);
            s_.metrics_->CountFinishedRequest("abort");
          }
          s_.active_requests_.fetch_sub(1);
        });
  }

  void Finish(const TimedEvent& last, const RequestTimer& timer, int64_t prompt_len) {
    s_.metrics_->ObserveEndToEndLatency(Seconds(last.at - timer.arrival));
    s_.metrics_->AddPromptTokens(last.event.prompt_tokens > 0 ? last.event.prompt_tokens : prompt_len);
    s_.metrics_->CountFinishedRequest(last.event.finish_reason);
  }

  static Usage UsageOf(const TimedEvent& last, int64_t prompt_len, int64_t tokens_seen) {
    Usage u;
    u.prompt_tokens = last.event.prompt_tokens > 0 ? last.event.prompt_tokens : prompt_len;
    u.completion_tokens = last.event.completion_tokens > 0 ? last.event.completion_tokens : tokens_seen;
    return u;
  }

  ApiError SubmitError(const absl::Status& st) {
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

  OpenAIServer& s_;
  const int64_t created_ = UnixNow();
};

OpenAIServer::OpenAIServer(engine::LLMEngine* engine, const tokenizer::Tokenizer* tokenizer, ServeMetrics* metrics,
                           OpenAIServerOptions options)
    : engine_(engine), tokenizer_(tokenizer), metrics_(metrics), options_(std::move(options)) {}

OpenAIServer::~OpenAIServer() { Stop(); }

absl::Status OpenAIServer::Start() {
  if (http_) return absl::FailedPreconditionError("the server is already started");
  // A client that closes its socket mid-stream must cost an error code, not the process.
  signal(SIGPIPE, SIG_IGN);
  http_ = std::make_unique<httplib::Server>();
  handlers_ = std::make_unique<Handlers>(*this);
  const int threads = std::max(2, options_.http_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // One small write per token: without TCP_NODELAY, Nagle's algorithm holds a chunk until the
  // client's (delayed) ACK of the previous one, adding up to 40 ms per token on Linux.
  http_->set_tcp_nodelay(true);
  http_->set_keep_alive_timeout(2);  // idle keep-alive connections hold a thread; release them soon
  http_->set_read_timeout(30, 0);
  http_->set_payload_max_length(64u << 20);

  Handlers* h = handlers_.get();
  http_->Get("/health", [h](const httplib::Request& q, httplib::Response& r) { h->Health(q, r); });
  http_->Get("/metrics", [h](const httplib::Request& q, httplib::Response& r) { h->Metrics(q, r); });
  http_->Get("/v1/models", [h](const httplib::Request& q, httplib::Response& r) { h->Models(q, r); });
  http_->Post("/v1/completions", [h](const httplib::Request& q, httplib::Response& r) { h->Completions(q, r); });
  http_->Post("/v1/chat/completions",
              [h](const httplib::Request& q, httplib::Response& r) { h->ChatCompletions(q, r); });
  // Unknown routes and httplib's own refusals (bad request line, body too large) get an
  // OpenAI-shaped body too; responses that already have one are left alone.
  http_->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& q, httplib::Response& r) {
    if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e = MakeError(r.status, r.status == 404 ? "invalid_request_error" : "server_error",
                           r.status == 404 ? "unknown route: " + q.method + " " + q.path
                                           : "HTTP error " + std::to_string(r.status));
    if (r.status >= 400 && r.status < 500) e.type = "invalid_request_error";
    r.set_content(ErrorJson(e), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    r.status = 500;
    r.set_content(ErrorJson(MakeError(500, "server_error", "internal error: " + what, "internal_error")),
                  "application/json");
  });

  // httplib listens with a backlog of 5 (compiled in): a burst of new connections overflows it,
  // and the kernel then drops handshakes (1 s SYN retries, or resets after a "connected" client
  // sent its request). Keep the listening socket and raise its backlog after bind (listen() on
  // a listening socket only updates the backlog).
  int listen_fd = -1;
  http_->set_socket_options([&listen_fd](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = sock;
  });
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ <= 0) return absl::UnavailableError("cannot bind " + options_.host + " to any port");
  } else {
    if (!http_->bind_to_port(options_.host, options_.port)) {
      return absl::UnavailableError("cannot bind " + options_.host + ":" + std::to_string(options_.port) +
                                    " (in use, or not an address of this machine)");
    }
    port_ = options_.port;
  }
  if (listen_fd >= 0 && ::listen(listen_fd, SOMAXCONN) != 0) {
    TLOG(WARN) << "could not raise the listen backlog: errno " << errno;
  }
  listener_ = std::thread([this] { http_->listen_after_bind(); });
  // listen_after_bind sets is_running before it accepts; wait for it so that callers can connect.
  for (int i = 0; i < 500 && !http_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return absl::OkStatus();
}

int OpenAIServer::Drain(std::chrono::milliseconds deadline) {
  draining_ = true;
  const Clock::time_point until = Clock::now() + deadline;
  while (active_requests_.load() > 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return active_requests_.load();
}

void OpenAIServer::Stop() {
  if (!http_) return;
  http_->stop();
  if (listener_.joinable()) listener_.join();
  http_.reset();
  handlers_.reset();
}

}  // namespace tandem::serve
