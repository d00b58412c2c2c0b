#include "openai/server_context.h"

#include <chrono>
#include <random>
#include <utility>

namespace tandem::openai {

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string RandomHex(int n) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string s(n, '0');
  for (char& c : s) c = kHex[rng() & 15];
  return s;
}

ApiError MakeError(int status, std::string type, std::string message, std::string code) {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
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

namespace {

// No chat prompt given: the built-in ChatML.
OpenAIServerOptions WithChatPrompt(OpenAIServerOptions o) {
  if (!o.chat_prompt) o.chat_prompt = tokenizer::ChatPrompt::ChatML();
  return o;
}

}  // namespace

ServerContext::ServerContext(engine::LLMEngine* engine_in, const tokenizer::Tokenizer* tokenizer_in,
                             ServeMetrics* metrics_in, OpenAIServerOptions options_in)
    : engine(engine_in),
      tokenizer(tokenizer_in),
      grammars(tokenizer_in != nullptr ? MakeGrammarCache(*tokenizer_in) : nullptr),
      metrics(metrics_in),
      options(WithChatPrompt(std::move(options_in))) {}

http::Response ServerContext::Error(const ApiError& e) const {
  http::Response r;
  r.status = e.http_status;
  if (e.http_status == 429 || e.http_status == 503) {
    r.headers.emplace_back("Retry-After", std::to_string(options.retry_after_seconds));
  }
  if (e.http_status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  r.body = ErrorJson(e);
  metrics->CountRejectedRequest(e.http_status);
  return r;
}

std::optional<ApiError> ServerContext::Authorize(const http::Request& req) const {
  if (options.api_key.empty()) return std::nullopt;
  const std::string want = "Bearer " + options.api_key;
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

bool ServerContext::Ready() const {
  return !draining.load() && engine->healthy() && (!options.ready || options.ready());
}

std::optional<ApiError> ServerContext::CheckModelAndReady(const std::string& model) const {
  if (!model.empty() && model != options.served_model_name) {
    ApiError e = MakeError(404, "invalid_request_error",
                           "the model '" + model + "' does not exist; this server serves '" +
                               options.served_model_name + "'",
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

std::optional<std::vector<int32_t>> ServerContext::EncodeWithinContext(std::string_view text) const {
  return tokenizer->EncodeAtMost(text, static_cast<size_t>(std::max<int32_t>(0, options.max_model_len)));
}

ApiError ServerContext::PromptTooLong(const std::string& param) const {
  return InvalidRequest("this model's maximum context length is " + std::to_string(options.max_model_len) +
                            " tokens; the prompt alone is longer",
                        param, "context_length_exceeded");
}

std::string ServerContext::TokenText(int32_t id) const {
  const std::string* bytes = tokenizer != nullptr ? tokenizer->TokenBytes(id) : nullptr;
  return bytes != nullptr ? *bytes : "token_id:" + std::to_string(id);
}

std::vector<LogprobEntry> ServerContext::LogprobEntries(const std::vector<engine::TokenLogprob>& logprobs) const {
  std::vector<LogprobEntry> out;
  out.reserve(logprobs.size());
  for (const engine::TokenLogprob& t : logprobs) {
    LogprobEntry e;
    e.token = TokenText(t.token);
    e.logprob = t.logprob;
    for (const auto& [id, lp] : t.top) e.top.emplace_back(TokenText(id), lp);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tandem::openai
