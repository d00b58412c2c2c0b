#include "openai/openai_server.h"

#include <signal.h>

#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "common/log.h"
#include "http/server.h"
#include "openai/generation_handlers.h"
#include "openai/openai_protocol.h"
#include "openai/response_json.h"
#include "openai/server_context.h"

namespace tandem::openai {
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

// The routes, over the state they share (so that a handler left running by Stop can be given all
// of it by leaking this one object).
class OpenAIServer::Handlers {
 public:
  Handlers(engine::LLMEngine* engine, const tokenizer::Tokenizer* tokenizer, ServeMetrics* metrics,
           const OpenAIServerOptions& options)
      : ctx(engine, tokenizer, metrics, options) {}

  ServerContext ctx;
  // Set once the HTTP server exists; read only on its event loop (the /metrics route).
  const http::Server* http = nullptr;

  // ---- Inline routes (the event loop: quick, never blocking) ----

  http::Response Health(const http::Request&) {
    if (ctx.Ready()) return http::Response{200, {}, "application/json", "{\"status\":\"ok\"}"};
    const std::string why = ctx.draining.load()         ? "shutting down"
                            : !ctx.engine->healthy() ? "engine failed: " + std::string(ctx.engine->fatal_error().message())
                                                     : "not ready";
    http::Response r{503, {}, "application/json", ErrorJson(MakeError(503, "server_error", why, "not_ready"))};
    r.headers.emplace_back("Retry-After", std::to_string(ctx.options.retry_after_seconds));
    return r;
  }

  http::Response Metrics(const http::Request&) {
    ctx.metrics->UpdateFromStats(ctx.engine->Stats());
    if (http != nullptr) {
      const http::ServerStats st = http->Stats();
      ctx.metrics->UpdateFromHttp({st.connections, st.evicted_total, st.timed_out_total, st.client_gone_total});
    }
    return http::Response{200, {}, "text/plain; version=0.0.4; charset=utf-8", ctx.metrics->Text()};
  }

  http::Response Models(const http::Request& req) {
    if (auto e = ctx.Authorize(req)) return ctx.Error(*e);
    return http::Response{200, {}, "application/json",
                          ModelsJson(ctx.options.served_model_name, ctx.created, ctx.options.max_model_len)};
  }

  // GET /v1/models/{id} of the served model (other ids: ModelNotFound).
  http::Response Model(const http::Request& req) {
    if (auto e = ctx.Authorize(req)) return ctx.Error(*e);
    return http::Response{200, {}, "application/json",
                          ModelJson(ctx.options.served_model_name, ctx.created, ctx.options.max_model_len)};
  }

  // The errors the HTTP layer makes itself. Routes match exactly, so GET /v1/models/<another
  // id> arrives here as an unknown route; OpenAI answers it as an unknown model.
  http::Response RenderHttpError(int status, const std::string& message) {
    static constexpr std::string_view kModelRoute = "unknown route: GET /v1/models/";
    if (status == 404 && message.rfind(kModelRoute, 0) == 0) {
      ApiError e = MakeError(404, "invalid_request_error",
                             "The model '" + message.substr(kModelRoute.size()) + "' does not exist", "model_not_found");
      e.param = "model";
      return ctx.Error(e);
    }
    return ctx.Error(HttpError(status, message));
  }
};

OpenAIServer::OpenAIServer(engine::LLMEngine* engine, const tokenizer::Tokenizer* tokenizer, ServeMetrics* metrics,
                           OpenAIServerOptions options)
    : options_(std::move(options)),
      handlers_(std::make_unique<Handlers>(engine, tokenizer, metrics, options_)) {}

OpenAIServer::~OpenAIServer() { Stop(); }

int OpenAIServer::active_requests() const { return handlers_ ? handlers_->ctx.active.load() : 0; }

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
  http_->HandleInline("GET", "/v1/models/" + options_.served_model_name,
                      [h](const http::Request& q) { return h->Model(q); });
  http_->Handle("POST", "/v1/completions", [h](http::Exchange& ex) { HandleCompletions(h->ctx, ex); });
  http_->Handle("POST", "/v1/chat/completions", [h](http::Exchange& ex) { HandleChatCompletions(h->ctx, ex); });
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
  handlers_->ctx.draining = true;
  const Clock::time_point until = Clock::now() + deadline;
  while (handlers_->ctx.active.load() > 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return handlers_->ctx.active.load();
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
